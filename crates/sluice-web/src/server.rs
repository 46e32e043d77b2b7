//! A bounded HTTP server: `hyper` on tokio's single-threaded runtime, on one thread of its
//! own, answering each request with a [`Handler`] (on tokio's blocking pool, at most
//! [`MAX_HANDLERS`] at once, so a handler that waits on a job, a savepoint say, delays no
//! other client's connection). A client costs a task, not a thread, so clients are served
//! concurrently and no number of them can exhaust the process's threads. What a client may
//! take is bounded, each bound a named constant of the limits table: [`MAX_CONNECTIONS`] open
//! at once (one more is answered `503` and closed), [`MAX_HEADER_BYTES`] of request line and
//! headers (more: `431`), [`MAX_BODY_BYTES`] of body (more: `413`), and a deadline for a
//! whole connection, from accept to the last byte of the answer (then it is closed;
//! [`REQUEST_DEADLINE`] unless the server is given another). One request per connection (no
//! keep-alive): the deadline bounds each request.
//!
//! The listeners are bound by the caller, so an address that cannot be had fails before
//! anything is served. Dropping the [`HttpServer`] stops it and closes its addresses.

use std::net::TcpListener as StdListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::WebError;

/// The most connections served at once, over all of a server's addresses.
pub const MAX_CONNECTIONS: usize = 128;
/// The most bytes of a request's line and headers (hyper's read buffer).
pub const MAX_HEADER_BYTES: usize = 16 << 10;
/// The most bytes of a request's body.
pub const MAX_BODY_BYTES: usize = 64 << 10;
/// The longest a connection stays open, from accept to the end of its answer, unless the
/// server is given another deadline.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// The most requests a server's handlers answer at once (each on a thread of tokio's
/// blocking pool); more wait for one of them.
pub const MAX_HANDLERS: usize = 8;
/// How long the server waits after a failed accept (no file descriptor left, say).
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// A request as a handler sees it: its body read whole.
pub type HttpRequest = Request<Bytes>;
/// An answer.
pub type HttpAnswer = Response<Full<Bytes>>;

/// What answers a server's requests on one of its addresses.
pub trait Handler: Send + Sync + 'static {
    /// The answer to `request`.
    fn answer(&self, request: &HttpRequest) -> HttpAnswer;
}

/// An answer of `status` with `body` of type `kind`, never cached.
pub fn answer(status: StatusCode, kind: &'static str, body: String) -> HttpAnswer {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The running server; dropping it stops it.
pub struct HttpServer {
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

/// What the server's tasks share.
struct Serving {
    /// Connections open now.
    // SYNC: only the server's one thread touches it (a single-threaded runtime); atomic for
    // `Sync`, Relaxed.
    open: AtomicUsize,
    deadline: Duration,
}

impl HttpServer {
    /// Serves each of `listeners` (bound, non-blocking) with its handler, each connection for
    /// at most `deadline`.
    pub fn start(
        listeners: Vec<(StdListener, Arc<dyn Handler>)>,
        deadline: Duration,
    ) -> Result<Self, WebError> {
        let (stop, stopped) = watch::channel(false);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .max_blocking_threads(MAX_HANDLERS)
            .build()
            .map_err(|source| WebError::Start {
                what: "the web server's runtime",
                source,
            })?;
        let serving = Arc::new(Serving {
            open: AtomicUsize::new(0),
            deadline,
        });
        let thread = std::thread::Builder::new()
            .name("sluice-http".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let mut accepting = tokio::task::JoinSet::new();
                    for (listener, handler) in listeners {
                        match TcpListener::from_std(listener) {
                            Ok(listener) => {
                                accepting.spawn(accept(listener, handler, serving.clone()));
                            }
                            Err(error) => tracing::warn!("the web server cannot listen: {error}"),
                        }
                    }
                    wait_for_stop(stopped).await;
                    // Dropping the tasks closes the listeners and every connection.
                    accepting.shutdown().await;
                });
            })
            .map_err(|source| WebError::Start {
                what: "the web server's thread",
                source,
            })?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
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
async fn accept(listener: TcpListener, handler: Arc<dyn Handler>, serving: Arc<Serving>) {
    let mut connections = tokio::task::JoinSet::new();
    let mut refusing = false;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // SYNC: Relaxed, one thread; see `Serving::open`.
                    if serving.open.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
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
                    serving.open.fetch_add(1, Ordering::Relaxed);
                    let (handler, serving) = (handler.clone(), serving.clone());
                    connections.spawn(async move {
                        // A connection past its deadline is dropped: closed.
                        let _ = tokio::time::timeout(serving.deadline, serve(stream, handler))
                            .await;
                        serving.open.fetch_sub(1, Ordering::Relaxed);
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

/// Serves the one request of `stream` with `handler`.
async fn serve(stream: TcpStream, handler: Arc<dyn Handler>) {
    let service = hyper::service::service_fn(|request: Request<hyper::body::Incoming>| {
        let handler = handler.clone();
        async move { Ok::<_, std::convert::Infallible>(respond(request, handler).await) }
    });
    // A client that breaks off or sends what is not HTTP loses its answer and nothing else.
    let _ = hyper::server::conn::http1::Builder::new()
        .max_buf_size(MAX_HEADER_BYTES)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// Reads the body of `request` (at most [`MAX_BODY_BYTES`]) and answers it with `handler` on
/// the blocking pool.
async fn respond(request: Request<hyper::body::Incoming>, handler: Arc<dyn Handler>) -> HttpAnswer {
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return answer(
                StatusCode::PAYLOAD_TOO_LARGE,
                "text/plain",
                format!(
                    "the body is over {MAX_BODY_BYTES} bytes (MAX_BODY_BYTES), or broken off\n"
                ),
            )
        }
    };
    let request = Request::from_parts(parts, body);
    tokio::task::spawn_blocking(move || handler.answer(&request))
        .await
        .unwrap_or_else(|_| {
            answer(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                "the answer failed\n".into(),
            )
        })
}
