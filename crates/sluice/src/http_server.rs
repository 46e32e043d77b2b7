//! The HTTP server of `sluice run`: the web page of `--ui ADDRESS:PORT` ([`crate::ui`]) and
//! the Prometheus endpoint of `--metrics-addr ADDRESS:PORT` ([`crate::prometheus`]), one
//! server for both (one address given to both serves both there).
//!
//! It is `hyper` on tokio's single-threaded runtime, on one thread of its own in the launching
//! process: a client costs a task, not a thread, so clients are served concurrently (a slow
//! one delays nobody) and no number of them can exhaust the process's threads. What a client
//! may take is bounded, each bound a named constant of the limits table:
//! [`MAX_CONNECTIONS`] open at once (one more is answered `503` and closed),
//! [`MAX_HEADER_BYTES`] of request line and headers (more: `431`), and [`REQUEST_DEADLINE`]
//! for a whole connection, from accept to the last byte of the answer (then it is closed).
//! One request per connection (no keep-alive): the deadline bounds each request.
//!
//! Both addresses are bound before the job starts, so an address that cannot be had fails
//! the run before anything runs; the figures are there once the job is attached
//! ([`HttpServer::attach`]). Dropping the server stops it and closes its addresses.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use sluice_plan::PhysicalPlan;
use sluice_runtime::{CheckpointHandle, MetricsHandle};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::ui::Page;
use sluice_runtime::CheckpointFigures;

/// The most connections served at once, over both addresses.
pub(crate) const MAX_CONNECTIONS: usize = 128;
/// The most bytes of a request's line and headers (hyper's read buffer).
pub(crate) const MAX_HEADER_BYTES: usize = 16 << 10;
/// The longest a connection stays open, from accept to the end of its answer.
pub(crate) const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// How long the server waits after a failed accept (no file descriptor left, say).
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// What an address serves.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Endpoints {
    page: bool,
    metrics: bool,
}

/// The running job, as the server sees it once attached.
pub(crate) struct Attached {
    pub metrics: MetricsHandle,
    /// Its checkpoints, when it takes them.
    pub checkpoints: Option<CheckpointHandle>,
}

impl Attached {
    /// What its checkpoints did so far; `None` when it takes none.
    pub(crate) fn checkpoint_figures(&self) -> Option<CheckpointFigures> {
        self.checkpoints
            .as_ref()
            .map(|c| CheckpointFigures::from(&c.summary()))
    }
}

/// What the server answers with.
struct Content {
    page: Option<Page>,
    job: OnceLock<Attached>,
    /// Connections open now.
    // SYNC: only the server's one thread touches it (a single-threaded runtime); atomic for
    // `Sync`, Relaxed.
    open: AtomicUsize,
}

/// The running server; dropping it stops it.
pub(crate) struct HttpServer {
    content: Arc<Content>,
    /// The address bound for `/metrics`, said once they are there.
    metrics_at: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

/// Serves the page of `plan` on `ui` and the metrics on `metrics`, each when given, in the
/// launching process only (a PE's process runs the same command line and serves nothing).
pub(crate) fn serve_if_asked(
    ui: Option<SocketAddr>,
    metrics: Option<SocketAddr>,
    plan: &PhysicalPlan,
) -> anyhow::Result<Option<HttpServer>> {
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
    let mut listeners = Vec::new();
    let mut metrics_at = None;
    for (address, endpoints) in addresses {
        let listener = std::net::TcpListener::bind(address)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .with_context(|| match endpoints.page {
                true => format!("cannot serve the web page on {address} (--ui)"),
                false => format!("cannot serve metrics on {address} (--metrics-addr)"),
            })?;
        let bound = listener.local_addr()?;
        if endpoints.page {
            tracing::info!("ui: http://{bound}/");
        }
        if endpoints.metrics {
            metrics_at = Some(bound);
        }
        listeners.push((listener, endpoints));
    }
    let content = Arc::new(Content {
        page: ui.map(|_| Page::new(plan)),
        job: OnceLock::new(),
        open: AtomicUsize::new(0),
    });
    let (stop, stopped) = watch::channel(false);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .context("cannot start the web server's runtime")?;
    let serving = content.clone();
    let thread = std::thread::Builder::new()
        .name("sluice-http".into())
        .spawn(move || {
            runtime.block_on(async move {
                let mut accepting = tokio::task::JoinSet::new();
                for (listener, endpoints) in listeners {
                    match TcpListener::from_std(listener) {
                        Ok(listener) => {
                            accepting.spawn(accept(listener, endpoints, serving.clone()));
                        }
                        Err(error) => tracing::warn!("the web server cannot listen: {error}"),
                    }
                }
                wait_for_stop(stopped).await;
                // Dropping the tasks closes the listeners and every connection.
                accepting.shutdown().await;
            });
        })
        .context("cannot start the web server's thread")?;
    Ok(Some(HttpServer {
        content,
        metrics_at,
        stop,
        thread: Some(thread),
    }))
}

impl HttpServer {
    /// From now on the server gives the figures of `metrics` and `checkpoints` (when it takes
    /// them), the running job's.
    pub(crate) fn attach(&self, metrics: MetricsHandle, checkpoints: Option<CheckpointHandle>) {
        let _ = self.content.job.set(Attached {
            metrics,
            checkpoints,
        });
        if let Some(bound) = self.metrics_at {
            tracing::info!("metrics: http://{bound}/metrics");
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Until the server is dropped.
async fn wait_for_stop(mut stopped: watch::Receiver<bool>) {
    // An error: the sender is gone, which is a stop too.
    let _ = stopped.wait_for(|stop| *stop).await;
}

/// Accepts connections on `listener` and serves each on a task of its own, at most
/// [`MAX_CONNECTIONS`] at once; the tasks end with this one.
async fn accept(listener: TcpListener, endpoints: Endpoints, content: Arc<Content>) {
    let mut connections = tokio::task::JoinSet::new();
    let mut refusing = false;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // SYNC: Relaxed, one thread; see `Content::open`.
                    if content.open.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                        if !refusing {
                            tracing::warn!(
                                "web server: {MAX_CONNECTIONS} connections open \
                                 (MAX_CONNECTIONS); refusing more until some close"
                            );
                        }
                        refusing = true;
                        refuse(&stream);
                        continue;
                    }
                    refusing = false;
                    content.open.fetch_add(1, Ordering::Relaxed);
                    let content = content.clone();
                    connections.spawn(async move {
                        // A connection past its deadline is dropped: closed.
                        let _ = tokio::time::timeout(
                            REQUEST_DEADLINE,
                            serve(stream, endpoints, &content),
                        )
                        .await;
                        content.open.fetch_sub(1, Ordering::Relaxed);
                    });
                }
                Err(error) => {
                    // Out of file descriptors, say: the connections open end in time.
                    tracing::debug!("web server: accept failed: {error}");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                }
            },
            // Reap the connections that ended, so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Answers a connection over the limit `503` as far as the socket takes it now, and closes it.
fn refuse(stream: &TcpStream) {
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n{}",
        BUSY.len(),
        BUSY
    );
    // A fresh socket's buffer takes these few bytes; a client that is gone loses them.
    let _ = stream.try_write(answer.as_bytes());
}

/// The body of a `503`.
const BUSY: &str = "too many connections (MAX_CONNECTIONS); try again\n";

/// Serves the one request of `stream`.
async fn serve(stream: TcpStream, endpoints: Endpoints, content: &Content) {
    let service = hyper::service::service_fn(|request: Request<hyper::body::Incoming>| {
        let response = respond(&request, endpoints, content);
        async move { Ok::<_, Infallible>(response) }
    });
    // A client that breaks off or sends what is not HTTP loses its answer and nothing else.
    let _ = hyper::server::conn::http1::Builder::new()
        .max_buf_size(MAX_HEADER_BYTES)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// The answer to `request`: the page's paths where it is served, `/metrics` where they are,
/// 404 otherwise; GET and HEAD only.
fn respond<B>(
    request: &Request<B>,
    endpoints: Endpoints,
    content: &Content,
) -> Response<Full<Bytes>> {
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
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                crate::prometheus::text(&job.metrics.snapshot(), job.checkpoint_figures().as_ref()),
            ),
            None => answer(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                "the job is starting\n".into(),
            ),
        };
    }
    if let Some(page) = content.page.as_ref().filter(|_| endpoints.page) {
        if let Some((kind, body)) = page.at(path, job) {
            return answer(StatusCode::OK, kind, body);
        }
    }
    let hint = match endpoints.metrics {
        true => "not found: the metrics are at /metrics\n",
        false => "not found\n",
    };
    answer(StatusCode::NOT_FOUND, "text/plain", hint.into())
}

/// An answer of `status` with `body` of type `kind`, never cached.
fn answer(status: StatusCode, kind: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
