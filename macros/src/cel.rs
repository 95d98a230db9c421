//! Compile-time parsing of CEL rules (`x-kubernetes-validations`) with the `cel` crate's parser, so
//! a rule with a syntax error is a compile error instead of a CRD the apiserver rejects.
//!
//! Only syntax is checked: the apiserver also type-checks rules against the schema and estimates
//! their cost, which needs the Kubernetes CEL environment.

/// Parses `source` as a CEL expression; the error names line, column and problem.
pub fn check(source: &str) -> Result<(), String> {
    match cel::parser::Parser::new().parse(source) {
        Ok(_) => Ok(()),
        Err(errors) => Err(errors
            .errors
            .first()
            .map(|e| format!("{}:{}: {}", e.pos.0, e.pos.1, e.msg))
            .unwrap_or_else(|| errors.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_should_accept_kubernetes_rules() {
        for rule in [
            "self.minReplicas <= self.replicas",
            "self.all(x, x.name != '')",
            "has(self.image) && self.image.startsWith('registry.example.com/')",
            "self.size() <= 3",
            "!has(oldSelf.name) || self.name == oldSelf.name",
            "self.matches('^[a-z]+$')",
            "quantity(self.memory).compareTo(quantity('1Gi')) < 0",
        ] {
            assert_eq!(check(rule), Ok(()), "{rule}");
        }
    }

    #[test]
    fn check_should_reject_syntax_errors() {
        assert!(check("self.replicas <=").is_err());
        assert!(check("self.a && (self.b").is_err());
        assert!(check("self..a").is_err());
    }
}
