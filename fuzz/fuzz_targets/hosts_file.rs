//! Fuzzes the hosts-file decoder ([`sluice_plan::HostsFile::read`]) and placement over the
//! hosts it yields: any bytes, as text, must decode or be refused (a syntax error with a line
//! and column inside the text), and WordCount's one-process-per-operator plan over hosts that
//! decode must come out or be refused, never panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use sluice_apps::AppConfig;
use sluice_plan::{HostsFileError, PlanOptions, PlanRequest};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let hosts = match sluice_plan::HostsFile::read(Path::new("hosts.toml"), text) {
        Ok(hosts) => hosts,
        Err(HostsFileError::Syntax(error)) => {
            sluice_fuzz::assert_located(text, &error);
            return;
        }
        Err(HostsFileError::Invalid { .. }) => return,
    };
    let app = sluice_apps::build("wordcount", &AppConfig::default()).expect("wordcount builds");
    let options = PlanOptions {
        hosts: Some(hosts),
        ..PlanOptions::default()
    };
    if let Ok(plan) = sluice_plan::plan(&app.graph, &PlanRequest::Processes, &options) {
        plan.check()
            .expect("a plan the planner returns passes its check");
    }
});
