//! The `process_*` series Prometheus client libraries export (client_golang's process
//! collector, which controller-runtime serves): CPU time, resident and virtual memory, open and
//! maximum file descriptors, start time, read from `/proc/self` when `/metrics` is scraped.
//! Elsewhere than on Linux there are none.

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{Counter, Gauge, Opts};

/// The families, as of now (empty where `/proc/self` cannot be read).
pub(crate) fn families() -> Vec<MetricFamily> {
    let Some(stat) = Stat::read() else {
        return Vec::new();
    };
    let mut families = Vec::new();
    let mut counter = |name: &str, help: &str, value: f64| {
        if let Ok(counter) = Counter::with_opts(Opts::new(name, help)) {
            counter.inc_by(value);
            families.extend(counter.collect());
        }
    };
    counter(
        "process_cpu_seconds_total",
        "Total user and system CPU time spent in seconds.",
        stat.cpu_seconds,
    );
    let mut gauge = |name: &str, help: &str, value: f64| {
        if let Ok(gauge) = Gauge::with_opts(Opts::new(name, help)) {
            gauge.set(value);
            families.extend(gauge.collect());
        }
    };
    gauge(
        "process_resident_memory_bytes",
        "Resident memory size in bytes.",
        stat.resident_bytes,
    );
    gauge(
        "process_virtual_memory_bytes",
        "Virtual memory size in bytes.",
        stat.virtual_bytes,
    );
    gauge(
        "process_start_time_seconds",
        "Start time of the process since unix epoch in seconds.",
        stat.start_time_seconds,
    );
    if let Some(open) = open_fds() {
        gauge("process_open_fds", "Number of open file descriptors.", open);
    }
    if let Some(max) = max_fds() {
        gauge(
            "process_max_fds",
            "Maximum number of open file descriptors.",
            max,
        );
    }
    families
}

/// What `/proc/self` says, in the units of the metrics.
struct Stat {
    cpu_seconds: f64,
    resident_bytes: f64,
    virtual_bytes: f64,
    start_time_seconds: f64,
}

/// The unit of the times in `/proc` (`USER_HZ`, what `sysconf(_SC_CLK_TCK)` returns: 100 on
/// every architecture Linux runs on).
const TICKS_PER_SECOND: f64 = 100.0;

impl Stat {
    fn read() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        Self::parse(&stat, &status, boot_time()?)
    }

    /// Parses `/proc/self/stat` (`man 5 proc`; the fields after the command name, which is in
    /// parentheses and may hold anything, so they start after the last `)`) and the memory
    /// sizes of `/proc/self/status` (in kB, so no page size is needed).
    fn parse(stat: &str, status: &str, boot: f64) -> Option<Self> {
        let (_, rest) = stat.rsplit_once(')')?;
        // `rest` starts with field 3 (state): field n is at index n - 3.
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| -> Option<f64> { fields.get(n - 3)?.parse().ok() };
        let kib = |key: &str| -> Option<f64> {
            let line = status.lines().find_map(|l| l.strip_prefix(key))?;
            let value: f64 = line.trim().trim_end_matches("kB").trim().parse().ok()?;
            Some(value * 1024.0)
        };
        Some(Self {
            cpu_seconds: (field(14)? + field(15)?) / TICKS_PER_SECOND,
            start_time_seconds: boot + field(22)? / TICKS_PER_SECOND,
            virtual_bytes: kib("VmSize:")?,
            resident_bytes: kib("VmRSS:")?,
        })
    }
}

/// When the machine booted (`btime` in `/proc/stat`), in seconds since the epoch.
fn boot_time() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|value| value.trim().parse().ok())
}

fn open_fds() -> Option<f64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as f64)
}

/// The soft limit of open files (`Max open files` in `/proc/self/limits`).
fn max_fds() -> Option<f64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?;
    line.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_should_be_read_after_the_command_name_whatever_it_holds() {
        // A command name with spaces and parentheses; utime 150, stime 50 ticks, started 1000
        // ticks after boot; 4 kB virtual, 40 kB resident.
        let line = "42 (a) b (c) S 1 42 42 0 -1 4194304 100 0 0 0 150 50 0 0 20 0 3 0 1000 4096 10 18446744073709551615";
        let status = "Name:\ta\nVmSize:\t       4 kB\nVmRSS:\t      40 kB\n";
        let stat = Stat::parse(line, status, 1_700_000_000.0).unwrap();
        assert!((stat.cpu_seconds - 2.0).abs() < 1e-9);
        assert!((stat.start_time_seconds - 1_700_000_010.0).abs() < 1e-9);
        assert!((stat.virtual_bytes - 4096.0).abs() < 1e-9);
        assert!((stat.resident_bytes - 40960.0).abs() < 1e-9);
        assert!(max_fds().is_some_and(|n| n >= 64.0));
    }

    #[test]
    fn this_process_should_report_every_series() {
        let names: Vec<String> = families().iter().map(|f| f.name().to_owned()).collect();
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_start_time_seconds",
            "process_open_fds",
            "process_max_fds",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} missing: {names:?}");
        }
    }
}
