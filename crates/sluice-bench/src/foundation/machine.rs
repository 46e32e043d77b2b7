//! Where a figure was measured: the commit built, the CPU model, the core count and how busy
//! the machine was (its load average).

/// The commit this binary was built from (`git rev-parse --short HEAD` at build time), or
/// `unknown`.
pub fn commit() -> &'static str {
    env!("SLUICE_BENCH_COMMIT")
}

/// The CPU model from `/proc/cpuinfo`, or `unknown`.
pub fn cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| model_name(&text))
        .unwrap_or_else(|| "unknown".into())
}

/// Cores available to this process.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The load average over the last minute (`/proc/loadavg`), or `None` where it cannot be read.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The first `model name` line of a `/proc/cpuinfo` text.
fn model_name(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        let value = value.trim();
        (key.trim() == "model name" && !value.is_empty()).then(|| value.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_model_name() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13 64-Core Processor\nmodel name\t: other\n";
        assert_eq!(
            model_name(text).as_deref(),
            Some("AMD EPYC 7B13 64-Core Processor")
        );
        assert_eq!(model_name("processor\t: 0\n"), None);
        assert_eq!(model_name("model name\t:\n"), None);
    }

    #[test]
    fn facts_are_never_empty() {
        assert!(!commit().is_empty());
        assert!(!cpu().is_empty());
        assert!(cores() >= 1);
        assert!(load_average().is_some_and(|load| load >= 0.0));
    }
}
