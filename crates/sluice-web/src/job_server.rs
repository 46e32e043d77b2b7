//! A running job's HTTP server, `sluice run`'s and a program's own alike: the web page of
//! `--ui ADDRESS:PORT` ([`crate::job_page`]) and the Prometheus endpoint of `--metrics-addr
//! ADDRESS:PORT` ([`crate::prometheus`]), one server for both (one address given to both
//! serves both there). It is the bounded server of [`crate::server`], whose bounds are in the
//! limits table. A program of its own serves them as `sluice run` does:
//! [`serve_if_asked`] before it starts its job, [`HttpServer::attach`] once it runs.
//!
//! Both addresses are bound before the job starts, so an address that cannot be had fails
//! the run before anything runs; the figures are there once the job is attached
//! ([`HttpServer::attach`]). Dropping the server stops it and closes its addresses.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use crate::job_page::{Page, PageFigures};
use crate::server::{answer, Handler, HttpAnswer, HttpRequest, REQUEST_DEADLINE};
use crate::WebError;
use hyper::{Method, StatusCode};
use sluice_plan::PhysicalPlan;
use sluice_runtime::{CheckpointFigures, CheckpointHandle, MetricsHandle};

/// What an address serves.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Endpoints {
    page: bool,
    metrics: bool,
}

/// The running job, as the server sees it once attached.
struct Attached {
    metrics: MetricsHandle,
    /// Its checkpoints, when it takes them.
    checkpoints: Option<CheckpointHandle>,
}

impl Attached {
    /// What its checkpoints did so far; `None` when it takes none.
    fn checkpoint_figures(&self) -> Option<CheckpointFigures> {
        self.checkpoints
            .as_ref()
            .map(|c| CheckpointFigures::from(&c.summary()))
    }
}

/// What the server answers with.
struct Content {
    page: Option<Page>,
    job: OnceLock<Attached>,
}

/// What one address answers.
struct JobEndpoints {
    endpoints: Endpoints,
    content: Arc<Content>,
}

/// The running server; dropping it stops it.
pub struct HttpServer {
    content: Arc<Content>,
    /// The address bound for the page.
    page_at: Option<SocketAddr>,
    /// The address bound for `/metrics`, said once they are there.
    metrics_at: Option<SocketAddr>,
    _server: crate::server::HttpServer,
}

/// Serves the page of `plan` on `ui` and the metrics on `metrics`, each when given, in the
/// launching process only (a PE's process runs the same command line and serves nothing).
pub fn serve_if_asked(
    ui: Option<SocketAddr>,
    metrics: Option<SocketAddr>,
    plan: &PhysicalPlan,
) -> Result<Option<HttpServer>, WebError> {
    if sluice_runtime::is_pe_process() || (ui.is_none() && metrics.is_none()) {
        return Ok(None);
    }
    let mut addresses: Vec<(SocketAddr, Endpoints)> = Vec::new();
    for (address, endpoints) in [
        (
            ui,
            Endpoints {
                page: true,
                metrics: false,
            },
        ),
        (
            metrics,
            Endpoints {
                page: false,
                metrics: true,
            },
        ),
    ] {
        let Some(address) = address else { continue };
        match addresses.iter_mut().find(|(a, _)| *a == address) {
            Some((_, both)) => {
                *both = Endpoints {
                    page: true,
                    metrics: true,
                }
            }
            None => addresses.push((address, endpoints)),
        }
    }
    let content = Arc::new(Content {
        page: ui.map(|_| Page::new(plan)),
        job: OnceLock::new(),
    });
    let mut listeners = Vec::new();
    let (mut page_at, mut metrics_at) = (None, None);
    for (address, endpoints) in addresses {
        let (what, flag) = match endpoints.page {
            true => ("the web page", "--ui"),
            false => ("metrics", "--metrics-addr"),
        };
        let listener = crate::bind(address, what, flag)?;
        let bound = listener.local_addr().map_err(|source| WebError::Bind {
            what,
            flag,
            address,
            source,
        })?;
        if endpoints.page {
            tracing::info!("ui: http://{bound}/");
            page_at = Some(bound);
        }
        if endpoints.metrics {
            metrics_at = Some(bound);
        }
        let handler: Arc<dyn Handler> = Arc::new(JobEndpoints {
            endpoints,
            content: content.clone(),
        });
        listeners.push((listener, handler));
    }
    Ok(Some(HttpServer {
        content,
        page_at,
        metrics_at,
        _server: crate::server::HttpServer::start(listeners, REQUEST_DEADLINE)?,
    }))
}

impl HttpServer {
    /// From now on the server gives the figures of `metrics` and `checkpoints` (when it takes
    /// them), the running job's.
    pub fn attach(&self, metrics: MetricsHandle, checkpoints: Option<CheckpointHandle>) {
        let _ = self.content.job.set(Attached {
            metrics,
            checkpoints,
        });
        if let Some(bound) = self.metrics_at {
            tracing::info!("metrics: http://{bound}/metrics");
        }
    }
}

impl HttpServer {
    /// Where the page is served (its port chosen when asked for port 0).
    pub fn page_address(&self) -> Option<SocketAddr> {
        self.page_at
    }

    /// Where `/metrics` is served (its port chosen when asked for port 0).
    pub fn metrics_address(&self) -> Option<SocketAddr> {
        self.metrics_at
    }
}

impl Handler for JobEndpoints {
    /// The page's paths where it is served, `/metrics` where they are, 404 otherwise; GET and
    /// HEAD only.
    fn answer(&self, request: &HttpRequest) -> HttpAnswer {
        let (endpoints, content) = (self.endpoints, &self.content);
        if !matches!(*request.method(), Method::GET | Method::HEAD) {
            return answer(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain",
                "GET only\n".into(),
            );
        }
        let path = request.uri().path();
        let job = content.job.get();
        if endpoints.metrics && path == "/metrics" {
            return match job {
                Some(job) => answer(
                    StatusCode::OK,
                    crate::prometheus::CONTENT_TYPE,
                    crate::prometheus::text(
                        &job.metrics.snapshot(),
                        job.checkpoint_figures().as_ref(),
                    ),
                ),
                None => answer(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/plain",
                    "the job is starting\n".into(),
                ),
            };
        }
        if let Some(page) = content.page.as_ref().filter(|_| endpoints.page) {
            let relative = path.strip_prefix('/').unwrap_or(path);
            if let Some((kind, body)) = page.at(relative, || figures(job)) {
                return answer(StatusCode::OK, kind, body);
            }
        }
        let hint = match endpoints.metrics {
            true => "not found: the metrics are at /metrics\n",
            false => "not found\n",
        };
        answer(StatusCode::NOT_FOUND, "text/plain", hint.into())
    }
}

/// What the page's `snapshot.json` says of `job` (none while it starts).
fn figures(job: Option<&Attached>) -> PageFigures {
    PageFigures {
        state: match job {
            Some(_) => "running",
            None => "starting",
        }
        .into(),
        snapshot: job.map(|j| j.metrics.snapshot()),
        checkpoints: job.and_then(Attached::checkpoint_figures),
        error: None,
        stoppable: false,
    }
}
