//! The order of things that depend on each other (dependents' `depends_on`).

/// Indices `0..deps.len()` with each after those it depends on (`deps[i]`), ties in index
/// order; a cycle is returned as its path (the first index repeated at its end).
///
/// # Errors
///
/// The first cycle found, as the indices along it.
pub fn order(deps: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
    // 0: not visited, 1: on the path, 2: placed.
    let mut mark = vec![0u8; deps.len()];
    let mut order = Vec::with_capacity(deps.len());
    let mut path = Vec::new();
    for i in 0..deps.len() {
        visit(i, deps, &mut mark, &mut order, &mut path)?;
    }
    Ok(order)
}

fn visit(
    i: usize,
    deps: &[Vec<usize>],
    mark: &mut [u8],
    order: &mut Vec<usize>,
    path: &mut Vec<usize>,
) -> Result<(), Vec<usize>> {
    match mark[i] {
        2 => return Ok(()),
        1 => {
            let start = path.iter().position(|&p| p == i).unwrap_or(0);
            let mut cycle = path[start..].to_vec();
            cycle.push(i);
            return Err(cycle);
        }
        _ => {}
    }
    mark[i] = 1;
    path.push(i);
    for &j in &deps[i] {
        visit(j, deps, mark, order, path)?;
    }
    path.pop();
    mark[i] = 2;
    order.push(i);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_should_put_each_after_its_dependencies_and_name_cycles() {
        assert_eq!(order(&[vec![2, 1], vec![], vec![]]), Ok(vec![2, 1, 0]));
        assert_eq!(order(&[vec![], vec![], vec![]]), Ok(vec![0, 1, 2]));
        assert_eq!(order(&[vec![2], vec![0], vec![1]]), Err(vec![0, 2, 1, 0]));
    }
}
