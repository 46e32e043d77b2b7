//! `sluice run --ui ADDRESS:PORT`: a web page of the running job, served on exactly that
//! address by a small HTTP server (`tiny_http`) on a thread of its own, from before the job
//! starts until it ends.
//!
//! - `/` is the page: the physical plan drawn ([`sluice_plan::PhysicalPlan::to_svg`]) with
//!   the live figures written on it (each instance's rates in and out, each edge label's rate
//!   and queue fill, each thread's share of time blocked by backpressure, a full queue's edges
//!   in red), and tables of the same figures below. Its script fetches `/snapshot.json` every
//!   second and rewrites the figures; everything is in the page (no external script, style
//!   or font), so it works with no network but the job's host.
//! - `/snapshot.json` is `{"state": "starting" | "running", "snapshot": ...}`, the snapshot
//!   being the launching process's `sluice_runtime::MetricsSnapshot` (null while starting).
//! - `/plan.svg` is the drawing alone.
//!
//! Only the launching process serves it (a PE's process, which runs the same command line,
//! does not). The server answers one request at a time; it binds before the job starts, so an
//! address in use fails the run before anything runs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

use anyhow::Context;
use sluice_plan::PhysicalPlan;
use sluice_runtime::MetricsHandle;
use tiny_http::{Header, Method, Request, Response, Server};

/// The page, with `{{TITLE}}`, `{{SVG}}` and `{{CHANNELS}}` to fill in.
const PAGE: &str = include_str!("ui.html");

/// The web page's server; dropping it stops the server.
pub(crate) struct Ui {
    server: Arc<Server>,
    metrics: Arc<OnceLock<MetricsHandle>>,
    thread: Option<JoinHandle<()>>,
    address: SocketAddr,
}

/// What the server answers with.
struct Content {
    page: String,
    svg: String,
    metrics: Arc<OnceLock<MetricsHandle>>,
}

/// The page of `plan` served on `address` when one is given, in the launching process only.
pub(crate) fn serve_if_asked(
    address: Option<SocketAddr>,
    plan: &PhysicalPlan,
) -> anyhow::Result<Option<Ui>> {
    let Some(address) = address.filter(|_| !sluice_runtime::is_pe_process()) else {
        return Ok(None);
    };
    let ui = serve(address, plan)?;
    tracing::info!("ui: http://{}/", ui.address);
    Ok(Some(ui))
}

/// Binds `address` and serves the page of `plan` from a thread of its own.
fn serve(address: SocketAddr, plan: &PhysicalPlan) -> anyhow::Result<Ui> {
    let server = Server::http(address)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("cannot serve the web page on {address} (--ui)"))?;
    let bound = server
        .server_addr()
        .to_ip()
        .context("the web page's server has no IP address")?;
    let server = Arc::new(server);
    let metrics = Arc::new(OnceLock::new());
    let svg = plan.to_svg();
    let content = Content {
        page: page(plan, &svg),
        svg,
        metrics: metrics.clone(),
    };
    let serving = server.clone();
    let thread = std::thread::Builder::new()
        .name("sluice-ui".into())
        .spawn(move || {
            for request in serving.incoming_requests() {
                // A client that breaks off loses its answer and nothing else.
                let _ = respond(request, &content);
            }
        })
        .context("cannot start the web page's thread")?;
    Ok(Ui {
        server,
        metrics,
        thread: Some(thread),
        address: bound,
    })
}

impl Ui {
    /// From now on the page shows the figures of `metrics`, the running job's.
    pub(crate) fn attach(&self, metrics: MetricsHandle) {
        let _ = self.metrics.set(metrics);
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
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

/// Answers one request: the page, the snapshot, the drawing, or 404.
fn respond(request: Request, content: &Content) -> std::io::Result<()> {
    if !matches!(request.method(), Method::Get | Method::Head) {
        return request.respond(Response::from_string("only GET\n").with_status_code(405));
    }
    let path = request.url().split('?').next().unwrap_or_default();
    let (body, kind) = match path {
        "/" | "/index.html" => (content.page.clone(), "text/html; charset=utf-8"),
        "/plan.svg" => (content.svg.clone(), "image/svg+xml"),
        "/snapshot.json" => (snapshot(&content.metrics), "application/json"),
        _ => return request.respond(Response::from_string("not found\n").with_status_code(404)),
    };
    let mut response = Response::from_string(body);
    for (name, value) in [("Content-Type", kind), ("Cache-Control", "no-store")] {
        if let Ok(header) = Header::from_bytes(name, value) {
            response.add_header(header);
        }
    }
    request.respond(response)
}

/// The JSON of `/snapshot.json`.
fn snapshot(metrics: &OnceLock<MetricsHandle>) -> String {
    let value = match metrics.get() {
        None => serde_json::json!({ "state": "starting", "snapshot": null }),
        Some(metrics) => serde_json::json!({ "state": "running", "snapshot": metrics.snapshot() }),
    };
    value.to_string()
}

/// `text` safe in HTML text.
fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
