//! What the benchmarks that place an application's jobs on hosts share: the hosts file, a
//! PE's process serving its part of the job, and the results printed as a table or as JSON
//! lines.

use std::io::Write;
use std::net::IpAddr;

use anyhow::bail;
use serde::Serialize;
use sluice_apps::AppConfig;
use sluice_plan::{HostSpec, HostsFile, LauncherSpec, PlanOptions, PlanRequest};
use sluice_runtime::RunOptions;

/// A PE of one of `bench`'s jobs, whose arguments name `apps`: builds the one application
/// with `config` and serves its part (the runtime exits the process when it is done).
pub(crate) fn serve_pe(bench: &str, apps: &[String], config: &AppConfig) -> anyhow::Result<()> {
    let [app] = apps else {
        bail!("a PE of sluice bench {bench} runs one application");
    };
    let app = sluice_apps::build(app, config)?;
    let plan = sluice_plan::plan(&app.graph, &PlanRequest::Fused, &PlanOptions::default())?;
    sluice_runtime::run(&app.graph, &plan, &RunOptions::default())?;
    Ok(())
}

/// Prints `results`: one JSON object a line with `json`, else `table` of them.
pub(crate) fn print<T: Serialize>(
    results: &[T],
    json: bool,
    table: impl FnOnce(&[T]) -> String,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        for result in results {
            writeln!(out, "{}", serde_json::to_string(result)?)?;
        }
    } else {
        out.write_all(table(results).as_bytes())?;
    }
    Ok(())
}

/// A hosts file of `hosts`, each a name, an address and its slots (`cores`), launched on this
/// machine.
pub(crate) fn hosts_file(hosts: impl Iterator<Item = (String, IpAddr, usize)>) -> HostsFile {
    HostsFile {
        hosts: hosts
            .map(|(name, address, cores)| HostSpec {
                name,
                address,
                cores,
                groups: Vec::new(),
                launch: Vec::new(),
            })
            .collect(),
        launcher: LauncherSpec::default(),
    }
}
