use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kube::config::{KubeConfigOptions, Kubeconfig};

use super::TestingError;

/// The `controlplane/run` script of this repository, used unless `KUBEFORGE_CONTROLPLANE` says otherwise.
const DEFAULT_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../controlplane/run");

/// A running Kubernetes control plane that tests talk to.
///
/// Obtain it with [`ControlPlane::shared`]; every test in a binary shares the same one.
#[derive(Debug)]
pub struct ControlPlane {
    kubeconfig_path: PathBuf,
    kubeconfig: Kubeconfig,
    script: Option<PathBuf>,
    /// A dedicated plane's state directory; such a plane is stopped when this value is dropped.
    dedicated: Option<PathBuf>,
}

static SHARED: OnceLock<Result<ControlPlane, String>> = OnceLock::new();

impl ControlPlane {
    /// Starts the local control plane, or reuses the one already running, once per process.
    ///
    /// With `KUBEFORGE_TEST_KUBECONFIG` set, that cluster is used instead and nothing is started.
    /// This call blocks (a cold start takes a few seconds, a first build of the control plane much
    /// longer); later calls return at once.
    ///
    /// # Errors
    ///
    /// Fails when the plane cannot be built or started; the error carries the script's output,
    /// including the tail of the failing component's log. Later calls return the same failure.
    pub fn shared() -> Result<&'static ControlPlane, TestingError> {
        SHARED
            .get_or_init(|| Self::start().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|message| TestingError::Unavailable {
                message: message.clone(),
            })
    }

    fn start() -> Result<ControlPlane, TestingError> {
        if let Some(path) = std::env::var_os("KUBEFORGE_TEST_KUBECONFIG") {
            let path = PathBuf::from(path);
            return Ok(ControlPlane {
                kubeconfig: read_kubeconfig(&path)?,
                kubeconfig_path: path,
                script: None,
                dedicated: None,
            });
        }
        let keep = std::env::var_os("KUBEFORGE_KEEP_PLANE").is_some();
        Self::start_local(None, keep, "")
    }

    /// Starts a control plane of its own (separate etcd, apiserver and controller-manager, named
    /// `name` for its state directory), for tests that disrupt it — stopping the apiserver, for
    /// example. It is stopped when the value is dropped, or when the test process exits.
    ///
    /// # Errors
    ///
    /// Fails when the plane cannot be built or started, or when `KUBEFORGE_TEST_KUBECONFIG`
    /// points at an external cluster (nothing local to start).
    pub fn dedicated(name: &str) -> Result<ControlPlane, TestingError> {
        Self::dedicated_with_gates(name, "")
    }

    /// A [dedicated](Self::dedicated) control plane whose apiserver runs with these feature
    /// gates (`--feature-gates`, e.g. `ShardedListAndWatch=true`), for tests of alpha features.
    ///
    /// # Errors
    ///
    /// As [`ControlPlane::dedicated`].
    pub fn dedicated_with_gates(name: &str, gates: &str) -> Result<ControlPlane, TestingError> {
        if std::env::var_os("KUBEFORGE_TEST_KUBECONFIG").is_some() {
            return Err(TestingError::Unavailable {
                message: "a dedicated control plane needs the local control plane \
                          (KUBEFORGE_TEST_KUBECONFIG is set)"
                    .to_owned(),
            });
        }
        let dir =
            std::env::temp_dir().join(format!("kubeforge-plane-{name}-{}", std::process::id()));
        Self::start_local(Some(dir), false, gates)
    }

    fn start_local(
        dir: Option<PathBuf>,
        keep: bool,
        gates: &str,
    ) -> Result<ControlPlane, TestingError> {
        let script = std::env::var_os("KUBEFORGE_CONTROLPLANE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_SCRIPT));
        let mut args = vec!["up".to_owned()];
        if !keep {
            args.push("--until-pid".to_owned());
            args.push(std::process::id().to_string());
        }
        let stdout = run_script(&script, dir.as_deref(), &args, gates)?;
        let path =
            last_line(&stdout)
                .map(PathBuf::from)
                .ok_or_else(|| TestingError::Unavailable {
                    message: format!("{} up printed no kubeconfig path", script.display()),
                })?;
        Ok(ControlPlane {
            kubeconfig: read_kubeconfig(&path)?,
            kubeconfig_path: path,
            script: Some(script),
            dedicated: dir,
        })
    }

    /// Path of the admin kubeconfig (a `system:masters` identity: it bypasses RBAC and API Priority
    /// and Fairness, so use [`ControlPlane::service_account_client`] where that matters).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// The apiserver's audit log: one line per request of a ServiceAccount outside
    /// `kube-system`, as it is received (legacy format: `… method="patch"
    /// user="system:serviceaccount:NS:NAME" … uri="/api/v1/…"`), in the order received. `None`
    /// for a cluster this harness did not start.
    pub fn audit_log(&self) -> Option<PathBuf> {
        self.script.as_ref()?;
        Some(
            self.kubeconfig_path
                .parent()?
                .join("logs")
                .join("audit.log"),
        )
    }

    /// A client configuration for the admin identity.
    ///
    /// # Errors
    ///
    /// Fails when the kubeconfig cannot be turned into a configuration (unreadable certificates).
    pub async fn config(&self) -> Result<kube::Config, TestingError> {
        config_from(&self.kubeconfig, &self.kubeconfig_path).await
    }

    /// A new admin client.
    ///
    /// A [`kube::Client`] belongs to the Tokio runtime it was created on, so each test creates its
    /// own; this is cheap.
    ///
    /// # Errors
    ///
    /// As [`ControlPlane::config`].
    pub async fn client(&self) -> Result<kube::Client, TestingError> {
        let config = self.config().await?;
        client_from(config, &self.kubeconfig_path)
    }

    /// Creates the ServiceAccount `namespace/name` (and the namespace) if missing and returns the
    /// path of a kubeconfig that authenticates as it with a bound token valid for 24 hours.
    ///
    /// The account starts with no permissions: bind the roles the test needs.
    ///
    /// # Errors
    ///
    /// Fails when the control plane was not started by this harness (an external
    /// `KUBEFORGE_TEST_KUBECONFIG`), or when the script fails.
    pub async fn service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<PathBuf, TestingError> {
        let stdout = self
            .script(vec![
                "kubeconfig-for".to_owned(),
                namespace.to_owned(),
                name.to_owned(),
            ])
            .await?;
        last_line(&stdout)
            .map(PathBuf::from)
            .ok_or_else(|| TestingError::Unavailable {
                message: "kubeconfig-for printed no path".to_owned(),
            })
    }

    async fn script(&self, args: Vec<String>) -> Result<String, TestingError> {
        let script = self
            .script
            .clone()
            .ok_or_else(|| TestingError::Unavailable {
                message: "this needs the local control plane (KUBEFORGE_TEST_KUBECONFIG is set)"
                    .to_owned(),
            })?;
        let dir = self.dedicated.clone();
        tokio::task::spawn_blocking(move || run_script(&script, dir.as_deref(), &args, ""))
            .await
            .map_err(|e| TestingError::Unavailable {
                message: format!("control-plane script task failed: {e}"),
            })?
    }

    /// Stops one component (`etcd`, `kube-apiserver` or `kube-controller-manager`) of a
    /// [dedicated](ControlPlane::dedicated) plane, for outage tests.
    ///
    /// # Errors
    ///
    /// Fails on the shared plane (other tests rely on it) or when the script fails.
    pub async fn stop_component(&self, component: &str) -> Result<(), TestingError> {
        self.disrupt("stop-component", component).await
    }

    /// Starts a component stopped by [`ControlPlane::stop_component`] again, with the same
    /// flags; for the apiserver, waits until it is ready.
    ///
    /// # Errors
    ///
    /// As [`ControlPlane::stop_component`].
    pub async fn start_component(&self, component: &str) -> Result<(), TestingError> {
        self.disrupt("start-component", component).await
    }

    /// Compacts etcd's history up to its current revision, as the apiserver does every five
    /// minutes: a watch resuming from an older resourceVersion gets `410 Gone` once the
    /// apiserver's watch cache no longer covers it (restart the apiserver to make sure).
    ///
    /// # Errors
    ///
    /// Fails on the shared plane (other tests rely on it) or when the script fails.
    pub async fn compact_etcd(&self) -> Result<(), TestingError> {
        if self.dedicated.is_none() {
            return Err(TestingError::Unavailable {
                message: "only a dedicated control plane may be compacted".to_owned(),
            });
        }
        self.script(vec!["compact-etcd".to_owned()]).await.map(drop)
    }

    async fn disrupt(&self, command: &str, component: &str) -> Result<(), TestingError> {
        if self.dedicated.is_none() {
            return Err(TestingError::Unavailable {
                message: "only a dedicated control plane may be disrupted".to_owned(),
            });
        }
        self.script(vec![command.to_owned(), component.to_owned()])
            .await
            .map(drop)
    }

    /// A client authenticated as the ServiceAccount `namespace/name`; see
    /// [`ControlPlane::service_account_kubeconfig`].
    ///
    /// # Errors
    ///
    /// As [`ControlPlane::service_account_kubeconfig`].
    pub async fn service_account_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<kube::Client, TestingError> {
        let path = self.service_account_kubeconfig(namespace, name).await?;
        let kubeconfig = read_kubeconfig(&path)?;
        let config = config_from(&kubeconfig, &path).await?;
        client_from(config, &path)
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if let (Some(dir), Some(script)) = (&self.dedicated, &self.script)
            && let Err(e) = run_script(script, Some(dir), &["down".to_owned()], "")
        {
            eprintln!("kubeforge::testing: stopping the dedicated control plane: {e}");
        }
    }
}

fn run_script(
    script: &Path,
    dir: Option<&Path>,
    args: &[String],
    gates: &str,
) -> Result<String, TestingError> {
    let mut command = Command::new(script);
    if let Some(dir) = dir {
        command.env("KUBEFORGE_PLANE_DIR", dir);
    }
    if !gates.is_empty() {
        command.env("KUBEFORGE_PLANE_FEATURE_GATES", gates);
    }
    let output = command
        .args(args)
        .output()
        .map_err(|source| TestingError::Spawn {
            script: script.to_owned(),
            source,
        })?;
    if !output.status.success() {
        return Err(TestingError::Script {
            script: script.to_owned(),
            args: args.join(" "),
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rfind(|l| !l.is_empty())
}

fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, TestingError> {
    Kubeconfig::read_from(path).map_err(|e| TestingError::Kubeconfig {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

async fn config_from(kubeconfig: &Kubeconfig, path: &Path) -> Result<kube::Config, TestingError> {
    kube::Config::from_custom_kubeconfig(kubeconfig.clone(), &KubeConfigOptions::default())
        .await
        .map_err(|e| TestingError::Kubeconfig {
            path: path.to_owned(),
            message: e.to_string(),
        })
}

fn client_from(config: kube::Config, path: &Path) -> Result<kube::Client, TestingError> {
    crate::client::connect(config).map_err(|e| TestingError::Kubeconfig {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::last_line;

    #[test]
    fn last_line_should_skip_trailing_blank_lines() {
        assert_eq!(
            last_line("log\n/tmp/x.kubeconfig\n\n"),
            Some("/tmp/x.kubeconfig")
        );
        assert_eq!(last_line("\n  \n"), None);
    }
}
