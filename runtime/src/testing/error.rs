use std::path::PathBuf;

/// Why the test environment could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TestingError {
    /// The control plane is not available (an earlier start failed, or a helper needs the local
    /// plane and an external cluster is configured).
    #[error("control plane unavailable: {message}")]
    Unavailable {
        /// Why.
        message: String,
    },
    /// The `controlplane/run` script could not be started at all.
    #[error(
        "could not run the control-plane script {script}: {source} (set KUBEFORGE_CONTROLPLANE \
         to the controlplane/run of a kubeforge checkout, or KUBEFORGE_TEST_KUBECONFIG to the \
         kubeconfig of another cluster)"
    )]
    Spawn {
        /// Path of the script.
        script: PathBuf,
        /// The I/O error from spawning it.
        #[source]
        source: std::io::Error,
    },
    /// The `controlplane/run` script ran and failed.
    #[error("`{script} {args}` failed ({status}):\n{stderr}")]
    Script {
        /// Path of the script.
        script: PathBuf,
        /// The arguments it was given.
        args: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What it printed on stderr (the component logs it tailed, for example).
        stderr: String,
    },
    /// The kubeconfig file could not be read or used.
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig {
        /// Path of the kubeconfig file.
        path: PathBuf,
        /// What was wrong with it.
        message: String,
    },
    /// A request to the apiserver failed.
    #[error("{action}: {}", crate::client::readable(.source))]
    Api {
        /// What the harness was doing.
        action: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A program the harness runs is not installed.
    #[error("{program} not found: {hint}")]
    NotInstalled {
        /// The program (`memcached`).
        program: String,
        /// How to install it, or where the harness looked.
        hint: String,
    },
    /// A server the harness runs (memcached) could not be started, or exited on its own.
    #[error("{program}: {message}")]
    Process {
        /// Path of the program.
        program: PathBuf,
        /// What went wrong, with what the program printed on stderr.
        message: String,
    },
    /// A condition was not reached in time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long the harness waited.
        after: std::time::Duration,
    },
}

impl TestingError {
    pub(crate) fn api(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Api { action, source }
    }
}
