//! The exporter's configuration from the standard `OTEL_*` environment variables
//! (<https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/>), the
//! subset that applies to an OTLP/HTTP trace exporter.

use std::time::Duration;

/// How spans are encoded on the wire (`OTEL_EXPORTER_OTLP_PROTOCOL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// `http/protobuf`, the default: binary protobuf over HTTP.
    HttpProtobuf,
    /// `http/json`: the JSON mapping of the same messages.
    HttpJson,
}

impl Protocol {
    pub(super) fn content_type(self) -> &'static str {
        match self {
            Self::HttpProtobuf => "application/x-protobuf",
            Self::HttpJson => "application/json",
        }
    }
}

/// Which traces are kept (`OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`). The decision is
/// made once per trace, from its id, so every span of a trace (all the reconciles of one
/// generation) is kept or dropped together.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampler {
    /// `always_on`, `parentbased_always_on` (the default).
    AlwaysOn,
    /// `always_off`, `parentbased_always_off`.
    AlwaysOff,
    /// `traceidratio`, `parentbased_traceidratio`: this fraction of traces, 0.0 to 1.0.
    Ratio(f64),
}

impl Sampler {
    /// Whether the trace `trace` is exported.
    pub(super) fn keeps(self, trace: u128) -> bool {
        match self {
            Self::AlwaysOn => true,
            Self::AlwaysOff => false,
            Self::Ratio(ratio) => {
                // The low 64 bits of a random id, as a fraction of 2^64.
                #[allow(clippy::cast_precision_loss)]
                let point = (trace as u64) as f64 / 18_446_744_073_709_551_616.0;
                point < ratio
            }
        }
    }
}

/// The exporter's settings. [`OtlpConfig::from_env`] reads them; every field is public so that
/// an operator can also build one in code.
#[derive(Clone, Debug)]
pub struct OtlpConfig {
    /// Where spans are POSTed: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as given, else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`, else `http://localhost:4318/v1/traces`.
    pub endpoint: String,
    /// `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`.
    pub protocol: Protocol,
    /// `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`: `key=value` pairs, comma-separated, URL-encoded.
    pub headers: Vec<(String, String)>,
    /// `OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT` in milliseconds (default 10 s): one export's bound.
    pub timeout: Duration,
    /// `service.name`: `OTEL_SERVICE_NAME`, else `service.name` in `OTEL_RESOURCE_ATTRIBUTES`,
    /// else the binary's file name.
    pub service_name: String,
    /// `OTEL_RESOURCE_ATTRIBUTES` (`key=value,...`), besides `service.name`.
    pub resource: Vec<(String, String)>,
    /// `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`.
    pub sampler: Sampler,
    /// `OTEL_BSP_SCHEDULE_DELAY` in milliseconds (default 5 s): how long finished spans wait for
    /// a batch to fill before they are sent.
    pub schedule_delay: Duration,
    /// `OTEL_BSP_MAX_QUEUE_SIZE` (default 2048): finished spans held; more are dropped and
    /// counted (`kubeforge_otlp_spans_dropped_total`).
    pub max_queue_size: usize,
    /// `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` (default 512): spans per request.
    pub max_export_batch_size: usize,
}

/// A variable that cannot be used, named with its value.
#[derive(Debug, thiserror::Error)]
#[error("{variable}={value:?}: {problem}")]
pub struct ConfigError {
    /// The variable.
    pub variable: &'static str,
    /// Its value.
    pub value: String,
    /// What is wrong with it.
    pub problem: String,
}

impl OtlpConfig {
    /// Reads the `OTEL_*` variables of this process.
    ///
    /// # Errors
    ///
    /// A variable with a value that cannot be used: a protocol other than `http/protobuf` and
    /// `http/json` (`grpc`: point the exporter at the collector's OTLP/HTTP port, 4318), an
    /// `https` endpoint (not supported: export to a local collector or agent), a number or
    /// sampler that does not parse.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
    }

    /// As [`OtlpConfig::from_env`], with the variables from `lookup` (tests).
    ///
    /// # Errors
    ///
    /// As [`OtlpConfig::from_env`].
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let either = |specific: &'static str, general: &'static str| {
            lookup(specific)
                .map(|v| (specific, v))
                .or_else(|| lookup(general).map(|v| (general, v)))
        };
        let endpoint = endpoint(&lookup)?;
        let protocol = match either(
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ) {
            None => Protocol::HttpProtobuf,
            Some((_, v)) if v == "http/protobuf" => Protocol::HttpProtobuf,
            Some((_, v)) if v == "http/json" => Protocol::HttpJson,
            Some((variable, value)) => {
                return Err(ConfigError {
                    variable,
                    value,
                    problem: "kubeforge exports with http/protobuf or http/json (for grpc, use the collector's OTLP/HTTP port, 4318)".to_owned(),
                });
            }
        };
        let headers = match either(
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "OTEL_EXPORTER_OTLP_HEADERS",
        ) {
            None => Vec::new(),
            Some((variable, value)) => pairs(&value).ok_or_else(|| ConfigError {
                variable,
                problem: "expected key=value pairs separated by commas".to_owned(),
                value,
            })?,
        };
        let millis = |specific, general, default: u64| -> Result<Duration, ConfigError> {
            match either(specific, general) {
                None => Ok(Duration::from_millis(default)),
                Some((variable, value)) => value
                    .trim()
                    .parse::<u64>()
                    .map(Duration::from_millis)
                    .map_err(|_| ConfigError {
                        variable,
                        value,
                        problem: "expected a whole number of milliseconds".to_owned(),
                    }),
            }
        };
        let timeout = millis(
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
            10_000,
        )?;
        let schedule_delay = millis("OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_SCHEDULE_DELAY", 5_000)?;
        let count = |variable: &'static str, default: usize| -> Result<usize, ConfigError> {
            match lookup(variable) {
                None => Ok(default),
                Some(value) => match value.trim().parse::<usize>() {
                    Ok(n) if n > 0 => Ok(n),
                    _ => Err(ConfigError {
                        variable,
                        value,
                        problem: "expected a positive whole number".to_owned(),
                    }),
                },
            }
        };
        let max_queue_size = count("OTEL_BSP_MAX_QUEUE_SIZE", 2048)?;
        let max_export_batch_size =
            count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)?.min(max_queue_size);
        let mut resource = match lookup("OTEL_RESOURCE_ATTRIBUTES") {
            None => Vec::new(),
            Some(value) => pairs(&value).ok_or_else(|| ConfigError {
                variable: "OTEL_RESOURCE_ATTRIBUTES",
                problem: "expected key=value pairs separated by commas".to_owned(),
                value,
            })?,
        };
        let named = resource
            .iter()
            .position(|(k, _)| k == "service.name")
            .map(|i| resource.remove(i).1);
        let service_name = lookup("OTEL_SERVICE_NAME")
            .or(named)
            .unwrap_or_else(binary_name);
        let sampler = sampler(
            lookup("OTEL_TRACES_SAMPLER"),
            lookup("OTEL_TRACES_SAMPLER_ARG"),
        )?;
        Ok(Self {
            endpoint,
            protocol,
            headers,
            timeout,
            service_name,
            resource,
            sampler,
            schedule_delay,
            max_queue_size,
            max_export_batch_size,
        })
    }
}

/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as given, else the base endpoint with `/v1/traces`.
fn endpoint(lookup: &impl Fn(&str) -> Option<String>) -> Result<String, ConfigError> {
    let endpoint = match (
        lookup("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        lookup("OTEL_EXPORTER_OTLP_ENDPOINT"),
    ) {
        (Some(traces), _) => ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces),
        (None, Some(base)) => (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("{}/v1/traces", base.trim_end_matches('/')),
        ),
        (None, None) => ("", "http://localhost:4318/v1/traces".to_owned()),
    };
    if !endpoint.1.starts_with("http://") {
        return Err(ConfigError {
            variable: endpoint.0,
            value: endpoint.1,
            problem: "only http:// endpoints are supported (export to a local collector or agent, which forwards with TLS)".to_owned(),
        });
    }
    Ok(endpoint.1)
}

fn sampler(name: Option<String>, arg: Option<String>) -> Result<Sampler, ConfigError> {
    let ratio = || -> Result<f64, ConfigError> {
        match arg.clone() {
            None => Ok(1.0),
            Some(value) => match value.trim().parse::<f64>() {
                Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
                _ => Err(ConfigError {
                    variable: "OTEL_TRACES_SAMPLER_ARG",
                    value,
                    problem: "expected a ratio from 0.0 to 1.0".to_owned(),
                }),
            },
        }
    };
    match name.as_deref().map(str::trim) {
        None | Some("always_on" | "parentbased_always_on") => Ok(Sampler::AlwaysOn),
        Some("always_off" | "parentbased_always_off") => Ok(Sampler::AlwaysOff),
        Some("traceidratio" | "parentbased_traceidratio") => Ok(Sampler::Ratio(ratio()?)),
        Some(_) => Err(ConfigError {
            variable: "OTEL_TRACES_SAMPLER",
            value: name.unwrap_or_default(),
            problem: "expected always_on, always_off, traceidratio or their parentbased_ forms"
                .to_owned(),
        }),
    }
}

/// `k1=v1,k2=v2` with `%XX` escapes; `None` if a pair has no `=` or an empty key.
fn pairs(text: &str) -> Option<Vec<(String, String)>> {
    text.split(',')
        .filter(|pair| !pair.trim().is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=')?;
            let k = unescape(k.trim());
            (!k.is_empty()).then(|| (k, unescape(v.trim())))
        })
        .collect()
}

fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = text.get(i + 1..i + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn binary_name() -> String {
    std::env::args_os()
        .next()
        .as_deref()
        .map(std::path::Path::new)
        .and_then(std::path::Path::file_name)
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "kubeforge-operator".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<OtlpConfig, ConfigError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        OtlpConfig::from_lookup(move |name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn defaults_follow_the_specification() {
        let c = config(&[]).expect("defaults");
        assert_eq!(c.endpoint, "http://localhost:4318/v1/traces");
        assert_eq!(c.protocol, Protocol::HttpProtobuf);
        assert_eq!(c.timeout, Duration::from_secs(10));
        assert_eq!(c.schedule_delay, Duration::from_secs(5));
        assert_eq!((c.max_queue_size, c.max_export_batch_size), (2048, 512));
        assert_eq!(c.sampler, Sampler::AlwaysOn);
    }

    #[test]
    fn the_traces_endpoint_is_taken_as_given_and_the_base_gains_the_path() {
        let c = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")]).expect("ok");
        assert_eq!(c.endpoint, "http://collector:4318/v1/traces");
        let c = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://other:9/custom",
            ),
        ])
        .expect("ok");
        assert_eq!(c.endpoint, "http://other:9/custom");
    }

    #[test]
    fn service_name_headers_and_resource_attributes() {
        let c = config(&[
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "service.name=from-attrs,k8s.pod.name=op-0,team=a%2Cb",
            ),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20x, tenant = t1",
            ),
        ])
        .expect("ok");
        assert_eq!(c.service_name, "from-attrs");
        assert_eq!(
            c.resource,
            [
                ("k8s.pod.name".into(), "op-0".into()),
                ("team".into(), "a,b".into())
            ]
        );
        assert_eq!(
            c.headers,
            [
                ("authorization".into(), "Bearer x".into()),
                ("tenant".into(), "t1".into())
            ]
        );
        let c = config(&[
            ("OTEL_SERVICE_NAME", "named"),
            ("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs"),
        ])
        .expect("ok");
        assert_eq!(c.service_name, "named");
    }

    #[test]
    fn unusable_values_are_refused_with_the_variable_named() {
        for (vars, variable) in [
            (
                &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")][..],
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ),
            (
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c:4318")][..],
                "OTEL_EXPORTER_OTLP_ENDPOINT",
            ),
            (
                &[("OTEL_BSP_SCHEDULE_DELAY", "5s")][..],
                "OTEL_BSP_SCHEDULE_DELAY",
            ),
            (
                &[("OTEL_TRACES_SAMPLER", "sometimes")][..],
                "OTEL_TRACES_SAMPLER",
            ),
            (
                &[
                    ("OTEL_TRACES_SAMPLER", "traceidratio"),
                    ("OTEL_TRACES_SAMPLER_ARG", "2"),
                ][..],
                "OTEL_TRACES_SAMPLER_ARG",
            ),
            (
                &[("OTEL_EXPORTER_OTLP_HEADERS", "novalue")][..],
                "OTEL_EXPORTER_OTLP_HEADERS",
            ),
        ] {
            let error = config(vars).expect_err("refused");
            assert_eq!(error.variable, variable, "{error}");
        }
        let c = config(&[("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")]).expect("ok");
        assert_eq!(c.protocol, Protocol::HttpJson);
    }

    #[test]
    fn the_ratio_sampler_keeps_about_its_share_and_decides_per_trace() {
        let sampler = Sampler::Ratio(0.25);
        let kept = (0..10_000u32)
            .filter(|_| sampler.keeps(crate::otlp::ids::trace_id()))
            .count();
        assert!((2_000..3_000).contains(&kept), "kept {kept} of 10000");
        let id = crate::otlp::ids::trace_id();
        assert_eq!(sampler.keeps(id), sampler.keeps(id));
        assert!(!Sampler::AlwaysOff.keeps(id));
        assert!(Sampler::Ratio(1.0).keeps(id));
    }
}
