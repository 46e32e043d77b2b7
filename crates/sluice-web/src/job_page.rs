//! A job's live web page: served by `sluice run --ui ADDRESS:PORT` at `/` for its one job,
//! and by `sluice ui` at `/jobs/ID/` for each job of the host ([`crate::host`]).
//!
//! - `./` is the page: the physical plan drawn ([`sluice_plan::PhysicalPlan::to_svg`]) with
//!   the live figures written on it (each instance's rates in and out, each edge label's rate
//!   and queue fill, each thread's share of time blocked by backpressure, a full queue's edges
//!   in red), and tables of the same figures below. Its script fetches `snapshot.json`
//!   (relative to the page) every second and rewrites the figures; everything is in the page
//!   (no external script, style or font), so it works with no network but the job's host.
//! - `snapshot.json` is [`PageFigures`]: `{"state": "starting" | "running" | "not answering" |
//!   "FINISHED" | "STOPPED" | "FAILED", "snapshot": ..., "checkpoints": ..., "error": ...,
//!   "stoppable": ...}`, the snapshot being the launching process's
//!   `sluice_runtime::MetricsSnapshot` (null while starting), the checkpoints what a
//!   checkpointed job's checkpoints and restarts did (null for a job that takes none), shown
//!   in a panel of the page, the error why an ended job failed. An ended job's page shows its
//!   last figures. Where `stoppable` is true (`sluice ui`) the page has a stop button, which
//!   posts to `stop` beside it.
//! - `plan.svg` is the drawing alone.

use std::collections::BTreeMap;

use serde::Serialize;
use sluice_plan::PhysicalPlan;
use sluice_runtime::{CheckpointFigures, MetricsSnapshot};

/// The page, with `{{TITLE}}`, `{{SVG}}` and `{{CHANNELS}}` to fill in.
const PAGE: &str = include_str!("job.html");

/// What `snapshot.json` says of the job.
#[derive(Debug, Clone, Serialize)]
pub struct PageFigures {
    /// `starting`, `running`, `not answering`, or how it ended (`FINISHED`, `STOPPED`,
    /// `FAILED`).
    pub state: String,
    /// Its figures; `None` while it starts.
    pub snapshot: Option<MetricsSnapshot>,
    /// What its checkpoints did; `None`: it takes none.
    pub checkpoints: Option<CheckpointFigures>,
    /// Why it failed.
    pub error: Option<String>,
    /// Whether the page offers to stop it.
    pub stoppable: bool,
}

/// What the page's paths answer with.
pub struct Page {
    page: String,
    svg: String,
}

impl Page {
    /// The page of `plan`.
    pub fn new(plan: &PhysicalPlan) -> Self {
        let svg = plan.to_svg();
        Self {
            page: page(plan, &svg),
            svg,
        }
    }

    /// The content type and body at `path` (relative to the page: `""` or `index.html` is
    /// the page), the figures from `figures`; `None` for a path that is not the page's.
    pub fn at(
        &self,
        path: &str,
        figures: impl FnOnce() -> PageFigures,
    ) -> Option<(&'static str, String)> {
        match path {
            "" | "index.html" => Some(("text/html; charset=utf-8", self.page.clone())),
            "plan.svg" => Some(("image/svg+xml", self.svg.clone())),
            "snapshot.json" => Some((
                "application/json",
                serde_json::to_string(&figures()).unwrap_or_else(|_| "null".into()),
            )),
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
    let title = escape_html(&format!("{} ({})", plan.job, plan.strategy));
    PAGE.replace("{{TITLE}}", &title)
        .replace("{{CHANNELS}}", &script_json(&channels))
        .replace("{{SVG}}", svg)
}

/// `value` as JSON safe inside a `<script>`, where `</` could end it: JSON allows `<\/`.
pub(crate) fn script_json(value: &impl Serialize) -> String {
    serde_json::to_string(value)
        .unwrap_or_else(|_| "null".into())
        .replace("</", "<\\/")
}

/// `text` safe in HTML text.
pub(crate) fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
