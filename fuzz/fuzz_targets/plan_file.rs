//! Fuzzes the plan-file decoder ([`sluice_plan::PlanFile::read`]) and the planner behind it:
//! any bytes, as text, must decode or fail with a line and column inside the text, and a plan
//! file that decodes must plan WordCount (four sum instances, so `sum[i]` names resolve) or be
//! refused, never panic; a plan that comes out passes its own check.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use sluice_apps::{AppConfig, Settings};
use sluice_plan::{PlanOptions, PlanRequest};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = match sluice_plan::PlanFile::read(Path::new("fuzz.toml"), text) {
        Ok(file) => file,
        Err(error) => {
            sluice_fuzz::assert_located(text, &error);
            return;
        }
    };
    let config = AppConfig {
        settings: Settings::parse(["parallelism=4"]).expect("a setting"),
        ..AppConfig::default()
    };
    let app = sluice_apps::build("wordcount", &config).expect("wordcount builds");
    let request = PlanRequest::File("fuzz.toml".into(), file);
    if let Ok(plan) = sluice_plan::plan(&app.graph, &request, &PlanOptions::default()) {
        plan.check()
            .expect("a plan the planner returns passes its check");
    }
});
