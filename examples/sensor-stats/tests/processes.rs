//! The example application gives the same statistics run in one thread, in threads, and as
//! one process per operator instance.

use std::process::Command;

#[test]
fn same_statistics_under_every_plan() {
    let dir = tempfile::tempdir().unwrap();
    let mut outputs = Vec::new();
    for plan in ["fused", "threaded", "processes"] {
        let path = dir.path().join(format!("{plan}.tsv"));
        let o = Command::new(env!("CARGO_BIN_EXE_sensor-stats"))
            .args(["--plan", plan, "--readings", "20000", "--sensors", "10"])
            .args(["--parallelism", "3", "--output", path.to_str().unwrap()])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{plan}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            stdout.contains("20000 readings from 10 sensors"),
            "{plan}: {stdout}"
        );
        if plan == "processes" {
            assert!(stdout.contains("(5 process(es))"), "{stdout}");
        }
        outputs.push(std::fs::read_to_string(&path).unwrap());
    }
    assert_eq!(outputs[0].lines().count(), 10);
    assert!(outputs.iter().all(|o| *o == outputs[0]));
}
