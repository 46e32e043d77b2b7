//! `sluice run --ui ADDRESS:PORT`: a web page of the running job, served on exactly that
//! address by the run's HTTP server ([`crate::http_server`], which bounds what a client may
//! take), from before the job starts until it ends.
//!
//! - `/` is the page: the physical plan drawn ([`sluice_plan::PhysicalPlan::to_svg`]) with
//!   the live figures written on it (each instance's rates in and out, each edge label's rate
//!   and queue fill, each thread's share of time blocked by backpressure, a full queue's edges
//!   in red), and tables of the same figures below. Its script fetches `/snapshot.json` every
//!   second and rewrites the figures; everything is in the page (no external script, style
//!   or font), so it works with no network but the job's host.
//! - `/snapshot.json` is `{"state": "starting" | "running", "snapshot": ..., "checkpoints":
//!   ...}`, the snapshot being the launching process's `sluice_runtime::MetricsSnapshot` (null
//!   while starting), the checkpoints what a checkpointed job's checkpoints and restarts did
//!   ([`crate::checkpoint_figures`]; null for a job that takes none), shown in a panel of
//!   the page.
//! - `/plan.svg` is the drawing alone.
//!
//! Only the launching process serves it (a PE's process, which runs the same command line,
//! does not). The server binds before the job starts, so an address in use fails the run
//! before anything runs.

use std::collections::BTreeMap;

use sluice_plan::PhysicalPlan;

use crate::http_server::Attached;

/// The page, with `{{TITLE}}`, `{{SVG}}` and `{{CHANNELS}}` to fill in.
const PAGE: &str = include_str!("ui.html");

/// What the page's paths answer with.
pub(crate) struct Page {
    page: String,
    svg: String,
}

impl Page {
    /// The page of `plan`.
    pub(crate) fn new(plan: &PhysicalPlan) -> Self {
        let svg = plan.to_svg();
        Self {
            page: page(plan, &svg),
            svg,
        }
    }

    /// The content type and body at `path`, the figures from `job` (none while it starts);
    /// `None` for a path that is not the page's.
    pub(crate) fn at(&self, path: &str, job: Option<&Attached>) -> Option<(&'static str, String)> {
        match path {
            "/" | "/index.html" => Some(("text/html; charset=utf-8", self.page.clone())),
            "/plan.svg" => Some(("image/svg+xml", self.svg.clone())),
            "/snapshot.json" => Some(("application/json", snapshot(job))),
            _ => None,
        }
    }
}

/// The page of `plan`, its drawing `svg` in it.
fn page(plan: &PhysicalPlan, svg: &str) -> String {
    // Which channel each edge label of the live metrics names: `a, b -> c` for a channel,
    // `a -> c` for one of its edges.
    let mut channels = BTreeMap::new();
    for channel in &plan.channels {
        channels.insert(plan.channel_label(channel), channel.name());
        for sender in &channel.senders {
            let label = format!(
                "{} -> {}",
                plan.instance(*sender).name,
                plan.instance(channel.to.instance).name
            );
            channels.insert(label, channel.name());
        }
    }
    // Inside a <script>, `</` could end it: JSON allows `<\/` for it.
    let channels = serde_json::to_string(&channels)
        .unwrap_or_else(|_| "{}".into())
        .replace("</", "<\\/");
    let title = escape_html(&format!("{} ({})", plan.job, plan.strategy));
    PAGE.replace("{{TITLE}}", &title)
        .replace("{{CHANNELS}}", &channels)
        .replace("{{SVG}}", svg)
}

/// The JSON of `/snapshot.json`.
fn snapshot(job: Option<&Attached>) -> String {
    let value = match job {
        None => serde_json::json!({ "state": "starting", "snapshot": null, "checkpoints": null }),
        Some(job) => serde_json::json!({
            "state": "running",
            "snapshot": job.metrics.snapshot(),
            "checkpoints": job.checkpoint_figures(),
        }),
    };
    value.to_string()
}

/// `text` safe in HTML text.
fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
