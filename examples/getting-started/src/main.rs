//! The getting-started program of the Sluice book (`docs/src/getting-started.md` shows this
//! file as it is): readings from four sensors, the invalid ones dropped, a running total kept
//! per sensor, and each sensor's total printed. Its first argument is the plan: `fused`,
//! `threaded` (the default) or `processes`; its second, how many readings (3,000 unless said:
//! 60,000 runs a minute, long enough to watch it and stop it).

use std::collections::BTreeMap;

use anyhow::Context;

use sluice_ops::{collected, Dataflow, Generator};
use sluice_plan::{plan, PlanOptions, PlanRequest};

/// A reading: the sensor it came from and its value.
type Reading = (u64, u64);

/// Builds the job, runs it under the plan named by the first argument and prints the totals.
pub fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let request = match args.next().as_deref() {
        Some("fused") => PlanRequest::Fused,
        Some("processes") => PlanRequest::Processes,
        _ => PlanRequest::Threaded,
    };
    let readings: u64 = match args.next() {
        Some(count) => count
            .parse()
            .context("the second argument counts readings")?,
        None => 3000,
    };

    // The graph: a source, a filter, a keyed running sum and a sink that collects.
    let flow = Dataflow::new("getting-started");
    let totals = flow
        .source_of("readings", move |_| {
            // 1,000 readings a second: three seconds for 3,000.
            Generator::new(|n: u64| Some((n % 4, n)))
                .count(readings)
                .rate(1000)
        })
        .filter("valid", |r: &Reading| !r.1.is_multiple_of(10))
        .key_by(|r: &Reading| &r.0)
        .sum("total", |r: &Reading| r.1)
        .collect("totals");
    let graph = flow.build()?;

    // The plan: which thread and which process runs each operator. Under `processes` this
    // program is started again once per process; `run` makes each of those one of the job's
    // processes, and returns only here, in the process that launched the job.
    let plan = plan(&graph, &request, &PlanOptions::default())?;
    // The run options, from the `SLUICE_*` variables and the file named by `SLUICE_CONFIG` as
    // `sluice run` reads them (`SLUICE_WORKERS=2`, say); the defaults where they say nothing.
    let options = sluice_runtime::configured_options()?;
    let report = sluice_runtime::run(&graph, &plan, &options)?;

    // What the sink collected comes back to this process under every plan: a running total
    // per reading, of which the greatest per sensor is its total.
    let mut per_sensor = BTreeMap::new();
    for (sensor, total) in collected(&totals) {
        let best = per_sensor.entry(sensor).or_insert(0);
        *best = total.max(*best);
    }
    println!("{} valid readings", report.tuples_in("total"));
    for (sensor, total) in per_sensor {
        println!("sensor {sensor}: {total}");
    }
    Ok(())
}
