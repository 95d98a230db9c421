//! Operator processes the tests freeze, thaw and kill.

use std::process::{Child, Command, Stdio};

/// Sends `signal` (`-STOP`, `-CONT`, ...) to `child`.
pub fn signal(child: &Child, signal: &str) {
    let pid = child.id().to_string();
    let status = Command::new("kill").args([signal, &pid]).status().unwrap();
    assert!(status.success(), "kill {signal} {pid}: {status}");
}

/// Whether `child` is stopped (state `T` in `/proc/<pid>/stat`).
pub fn stopped(child: &Child) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id()));
    // The state follows the command name, which is in parentheses.
    stat.ok()
        .and_then(|s| Some(s[s.rfind(')')? + 1..].trim_start().starts_with('T')))
        .unwrap_or(false)
}

/// Whether `child` has exited (a zombie not reaped yet, state `Z`, or reaped and gone).
pub fn exited(child: &Child) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id()));
    match stat {
        Ok(s) => s
            .rfind(')')
            .is_some_and(|at| s[at + 1..].trim_start().starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

/// Kills `child` and reaps it; a frozen process is continued first (it ignores SIGKILL until
/// then).
pub fn kill(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-CONT", &child.id().to_string()])
        .stderr(Stdio::null())
        .status();
    let _ = child.kill();
    let _ = child.wait();
}
