//! `sluice ui [ADDRESS:PORT]`: every job of this user on this host, over HTTP. A REST API
//! shaped as Flink's, answering JSON (errors as `{"errors": [...]}`):
//!
//! - `GET /jobs`: `{"jobs": [...]}`, each job's overview ([`Overview`]): the running ones
//!   (the job registry, [`sluice_runtime::registry`]), oldest first, then the ended ones
//!   (their kept summaries, [`sluice_runtime::summaries`]), newest first;
//! - `GET /jobs/ID`: its overview with its plan and its last error;
//! - `GET /jobs/ID/metrics`: its `MetricsSnapshot` (an ended job's last);
//! - `GET /jobs/ID/checkpoints`: what its checkpoints and restarts did (404 when it takes
//!   none);
//! - `POST /jobs/ID/stop`: asks it to drain and stop, as `sluice stop --no-wait` does (`202`);
//! - `GET /metrics`: every running job's live metrics in the Prometheus text format
//!   ([`crate::prometheus::text_of`]), each series labelled with the job's `id`: one scrape
//!   target for every job of the host, a program of its own included;
//! - `POST /jobs/ID/savepoint`, body `{"target-directory": "/abs/dir"}` or none: a savepoint,
//!   as `sluice savepoint` takes it, waiting for it at most [`SAVEPOINT_WAIT`]:
//!   `{"location": DIR}`, or `409` with the job's reason for none.
//!
//! And pages: `/` lists the jobs (refreshed every two seconds, a stop button by each running
//! one), `/jobs/ID/` is a job's page ([`crate::job_page`]: its plan, rates, backpressure,
//! latency, checkpoints, last error, a stop button), an ended job's with its last figures.
//!
//! Bound to loopback by default. Bound anywhere else it needs a token, and every request
//! without it is answered `401`: as `Authorization: Bearer TOKEN`, a `token=TOKEN` query
//! parameter (a page opened so sets a `SameSite=Strict` cookie, so its script's requests
//! carry it), or that cookie.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper::header::{HeaderValue, AUTHORIZATION, COOKIE, SET_COOKIE, WWW_AUTHENTICATE};
use hyper::{Method, StatusCode};
use serde::{Deserialize, Serialize};
use sluice_plan::PhysicalPlan;
use sluice_runtime::registry::{self, JobEntry, RegistryError};
use sluice_runtime::summaries::{self, JobSummary};
use sluice_runtime::{CheckpointFigures, MetricsSnapshot};

use crate::job_page::{escape_html, Page, PageFigures};
use crate::prometheus::JobFigures;
use crate::server::{answer, Handler, HttpAnswer, HttpRequest, HttpServer, REQUEST_DEADLINE};
use crate::WebError;

/// The longest `POST /jobs/ID/savepoint` waits for the savepoint.
pub const SAVEPOINT_WAIT: Duration = Duration::from_secs(30);
/// The address `sluice ui` binds unless told another (Flink's web port).
pub const DEFAULT_ADDRESS: &str = "127.0.0.1:8081";
/// The cookie carrying the token.
const TOKEN_COOKIE: &str = "sluice_ui_token";
/// The list page.
const LIST_PAGE: &str = include_str!("host.html");

/// `sluice ui`'s server; dropping it stops it.
pub struct HostUi {
    _server: HttpServer,
    address: SocketAddr,
}

impl HostUi {
    /// Serves the host's jobs on `address`, requiring `token` of every request when given;
    /// refuses an address off loopback without a token.
    pub fn serve(address: SocketAddr, token: Option<String>) -> Result<Self, WebError> {
        if let Some(token) = &token {
            if token.is_empty() {
                return Err(WebError::TokenEmpty);
            }
            if let Some(c) = token
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || "-_.~".contains(*c)))
            {
                return Err(WebError::TokenCharacter(c));
            }
        } else if !address.ip().is_loopback() {
            return Err(WebError::TokenRequired { address });
        }
        let listener = crate::bind(address, "the jobs' web UI", "sluice ui")?;
        let address = listener.local_addr().map_err(|source| WebError::Bind {
            what: "the jobs' web UI",
            flag: "sluice ui",
            address,
            source,
        })?;
        let handler: Arc<dyn Handler> = Arc::new(Host { token });
        // A savepoint's answer waits for it.
        let server =
            HttpServer::start(vec![(listener, handler)], SAVEPOINT_WAIT + REQUEST_DEADLINE)?;
        Ok(Self {
            _server: server,
            address,
        })
    }

    /// The address bound (its port chosen when asked for port 0).
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

/// The handler: the token it requires, if any.
struct Host {
    token: Option<String>,
}

/// A job of the host.
enum Job {
    /// Running: its entry and its latest metrics (`None`: it does not answer).
    Running(JobEntry, Option<MetricsSnapshot>),
    /// Ended: what was kept of it.
    Ended(Box<JobSummary>),
}

/// A job as `GET /jobs` lists it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Overview {
    /// Its registry ID.
    pub id: String,
    /// Its application.
    pub name: String,
    /// Its plan's strategy.
    pub plan: String,
    /// Its PEs.
    pub pes: usize,
    /// `RUNNING`, `NOT_ANSWERING` (its process lives but is silent), or how it ended:
    /// `FINISHED`, `STOPPED`, `FAILED`.
    pub status: String,
    /// When it started, in milliseconds since the Unix epoch.
    pub start_time: u64,
    /// When it ended, likewise; `None` while it runs.
    pub end_time: Option<u64>,
    /// How long it has run (ran), in milliseconds.
    pub duration: u64,
    /// Its sources' tuples a second now (at its end); `None` when not known.
    pub source_rate: Option<f64>,
}

impl Job {
    fn id(&self) -> &str {
        match self {
            Job::Running(entry, _) => &entry.id,
            Job::Ended(summary) => &summary.entry.id,
        }
    }

    fn overview(&self) -> Overview {
        let (entry, status, end, metrics) = match self {
            Job::Running(entry, metrics) => {
                let status = match metrics {
                    Some(_) => "RUNNING",
                    None => "NOT_ANSWERING",
                };
                (entry, status.to_string(), None, metrics.as_ref())
            }
            Job::Ended(summary) => {
                let status = serde_json::to_value(summary.outcome)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                (
                    &summary.entry,
                    status,
                    Some(summary.ended),
                    Some(&summary.metrics),
                )
            }
        };
        let now = end.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        });
        let duration = match (end, metrics) {
            (None, Some(m)) => (m.uptime_secs * 1e3) as u64,
            _ => now.saturating_sub(entry.started) * 1000,
        };
        Overview {
            id: entry.id.clone(),
            name: entry.app.clone(),
            plan: entry.plan.clone(),
            pes: entry.pes,
            status,
            start_time: entry.started * 1000,
            end_time: end.map(|e| e * 1000),
            duration,
            source_rate: metrics
                .filter(|m| !m.pes.is_empty())
                .map(MetricsSnapshot::source_rate),
        }
    }
}

/// Every running job that answers, in the Prometheus text format (one that does not answer is
/// left out; its checkpoints' figures too when they cannot be had).
fn host_metrics() -> Result<String, RegistryError> {
    let running: Vec<(JobEntry, MetricsSnapshot, Option<CheckpointFigures>)> = registry::running()?
        .into_iter()
        .filter_map(|(entry, metrics)| {
            let checkpoints = entry
                .checkpoints
                .as_ref()
                .and_then(|_| registry::checkpoints_of(&entry.socket).ok().flatten());
            Some((entry, metrics?, checkpoints))
        })
        .collect();
    let figures: Vec<JobFigures<'_>> = running
        .iter()
        .map(|(entry, snapshot, checkpoints)| JobFigures {
            id: Some(&entry.id),
            snapshot,
            checkpoints: checkpoints.as_ref(),
        })
        .collect();
    Ok(crate::prometheus::text_of(&figures))
}

/// Every job of the host: the running ones, then the ended ones not running again.
fn jobs() -> Result<Vec<Job>, RegistryError> {
    let mut jobs: Vec<Job> = registry::running()?
        .into_iter()
        .map(|(entry, metrics)| Job::Running(entry, metrics))
        .collect();
    for summary in summaries::ended()? {
        if !jobs.iter().any(|j| j.id() == summary.entry.id) {
            jobs.push(Job::Ended(Box::new(summary)));
        }
    }
    Ok(jobs)
}

/// Why a request failed: its status and message.
struct Refusal(StatusCode, String);

impl From<RegistryError> for Refusal {
    fn from(error: RegistryError) -> Self {
        Refusal(StatusCode::BAD_GATEWAY, error.to_string())
    }
}

/// A JSON answer.
fn json(status: StatusCode, value: &impl Serialize) -> HttpAnswer {
    answer(
        status,
        "application/json",
        serde_json::to_string(value).unwrap_or_else(|_| "null".into()),
    )
}

/// The body of a savepoint's request.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct SavepointAsk {
    /// Where to keep it (absolute); default: a new directory in the job's checkpoint
    /// directory.
    target_directory: Option<PathBuf>,
}

impl Handler for Host {
    fn answer(&self, request: &HttpRequest) -> HttpAnswer {
        let by_query = match self.authorize(request) {
            Some(by_query) => by_query,
            None => {
                let mut refused = json(
                    StatusCode::UNAUTHORIZED,
                    &serde_json::json!({ "errors": [
                        "a token is required: Authorization: Bearer TOKEN, or ?token=TOKEN"
                    ]}),
                );
                refused
                    .headers_mut()
                    .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                return refused;
            }
        };
        let mut answered = route(request).unwrap_or_else(|Refusal(status, why)| {
            json(status, &serde_json::json!({ "errors": [why] }))
        });
        if let (true, Some(token)) = (by_query, &self.token) {
            let cookie = format!("{TOKEN_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
            if let Ok(cookie) = HeaderValue::from_str(&cookie) {
                answered.headers_mut().insert(SET_COOKIE, cookie);
            }
        }
        answered
    }
}

impl Host {
    /// Whether `request` may be answered: `None` if not, `Some(true)` when its token came
    /// in the query (the answer sets the cookie), `Some(false)` otherwise.
    fn authorize(&self, request: &HttpRequest) -> Option<bool> {
        let Some(token) = &self.token else {
            return Some(false);
        };
        let header = request
            .headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let cookies = request
            .headers()
            .get_all(COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().strip_prefix(TOKEN_COOKIE)?.strip_prefix('='));
        if header.into_iter().chain(cookies).any(|t| same(t, token)) {
            return Some(false);
        }
        let query = request.uri().query().unwrap_or_default();
        query
            .split('&')
            .filter_map(|p| p.strip_prefix("token="))
            .any(|t| same(t, token))
            .then_some(true)
    }
}

/// Whether `given` is `token`, in a time that does not depend on where they differ.
fn same(given: &str, token: &str) -> bool {
    given.len() == token.len()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
}

/// The answer to an authorized `request`.
fn route(request: &HttpRequest) -> Result<HttpAnswer, Refusal> {
    let path = request.uri().path();
    let method = request.method();
    if matches!(path, "/" | "/index.html") {
        only(method, &Method::GET)?;
        return Ok(answer(
            StatusCode::OK,
            "text/html; charset=utf-8",
            LIST_PAGE.to_string(),
        ));
    }
    if path == "/metrics" {
        only(method, &Method::GET)?;
        return Ok(answer(
            StatusCode::OK,
            crate::prometheus::CONTENT_TYPE,
            host_metrics()?,
        ));
    }
    if path == "/jobs" {
        only(method, &Method::GET)?;
        let jobs: Vec<Overview> = jobs()?.iter().map(Job::overview).collect();
        return Ok(json(StatusCode::OK, &serde_json::json!({ "jobs": jobs })));
    }
    let Some(rest) = path.strip_prefix("/jobs/") else {
        return Err(not_found(path));
    };
    let (id, what) = rest
        .split_once('/')
        .map_or((rest, None), |(i, w)| (i, Some(w)));
    let job = jobs()?.into_iter().find(|j| j.id() == id).ok_or_else(|| {
        Refusal(
            StatusCode::NOT_FOUND,
            format!("no job '{id}' on this host, running or kept (see GET /jobs)"),
        )
    })?;
    match what {
        None => {
            only(method, &Method::GET)?;
            detail(&job)
        }
        Some("metrics") => {
            only(method, &Method::GET)?;
            Ok(json(StatusCode::OK, &metrics(&job)?))
        }
        Some("checkpoints") => {
            only(method, &Method::GET)?;
            match checkpoints(&job)? {
                Some(figures) => Ok(json(StatusCode::OK, &figures)),
                None => Err(Refusal(
                    StatusCode::NOT_FOUND,
                    format!(
                        "job '{id}' takes no checkpoints (run it with --checkpoint-every; in \
                         a program of its own, RunOptions::checkpoints)"
                    ),
                )),
            }
        }
        Some("stop") => {
            only(method, &Method::POST)?;
            stop(&job)
        }
        Some("savepoint") => {
            only(method, &Method::POST)?;
            savepoint(&job, request.body())
        }
        Some(page) => {
            only(method, &Method::GET)?;
            let plan = plan(&job)?;
            Page::new(&plan)
                .at(page, || figures(&job))
                .map(|(kind, body)| answer(StatusCode::OK, kind, body))
                .ok_or_else(|| not_found(path))
        }
    }
}

/// Refuses any method but `allowed`.
fn only(method: &Method, allowed: &Method) -> Result<(), Refusal> {
    match method == allowed || (allowed == Method::GET && method == Method::HEAD) {
        true => Ok(()),
        false => Err(Refusal(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{allowed} only here"),
        )),
    }
}

fn not_found(path: &str) -> Refusal {
    Refusal(
        StatusCode::NOT_FOUND,
        format!("no {} here: see /jobs", escape_html(path)),
    )
}

/// The entry of a running job, or why it cannot be asked.
fn running(job: &Job) -> Result<&JobEntry, Refusal> {
    match job {
        Job::Running(entry, _) => Ok(entry),
        Job::Ended(summary) => Err(Refusal(
            StatusCode::CONFLICT,
            format!(
                "job '{}' has ended ({:?})",
                summary.entry.id, summary.outcome
            ),
        )),
    }
}

/// `result` of asking `entry`'s job, its failure said with what its process does.
fn asked<T>(entry: &JobEntry, result: Result<T, RegistryError>) -> Result<T, Refusal> {
    result.map_err(|error| {
        Refusal(
            StatusCode::BAD_GATEWAY,
            format!(
                "job '{}' (pid {}) does not answer: {}: {error}",
                entry.id,
                entry.pid,
                registry::silence(entry.pid)
            ),
        )
    })
}

fn metrics(job: &Job) -> Result<MetricsSnapshot, Refusal> {
    match job {
        Job::Running(entry, _) => asked(entry, registry::metrics_of(&entry.socket)),
        Job::Ended(summary) => Ok(summary.metrics.clone()),
    }
}

fn checkpoints(job: &Job) -> Result<Option<CheckpointFigures>, Refusal> {
    match job {
        Job::Running(entry, _) => asked(entry, registry::checkpoints_of(&entry.socket)),
        Job::Ended(summary) => Ok(summary.checkpoints.clone()),
    }
}

fn plan(job: &Job) -> Result<PhysicalPlan, Refusal> {
    match job {
        Job::Running(entry, _) => asked(entry, registry::plan_of(&entry.socket)),
        Job::Ended(summary) => Ok(summary.plan.clone()),
    }
}

/// Why the job failed; for a running one, its last restart's cause.
fn last_error(job: &Job, checkpoints: Option<&CheckpointFigures>) -> Option<String> {
    match job {
        Job::Running(..) => checkpoints
            .and_then(|c| c.restarts.last())
            .map(|r| r.cause.clone()),
        Job::Ended(summary) => summary.error.clone(),
    }
}

/// `GET /jobs/ID`.
fn detail(job: &Job) -> Result<HttpAnswer, Refusal> {
    let checkpoints = checkpoints(job).ok().flatten();
    let mut value = serde_json::to_value(job.overview()).unwrap_or_default();
    value["plan"] = serde_json::to_value(plan(job)?).unwrap_or_default();
    value["error"] =
        serde_json::to_value(last_error(job, checkpoints.as_ref())).unwrap_or_default();
    Ok(json(StatusCode::OK, &value))
}

/// `snapshot.json` of a job's page.
fn figures(job: &Job) -> PageFigures {
    let checkpoints = checkpoints(job).ok().flatten();
    let overview = job.overview();
    let state = match (job, overview.status.as_str()) {
        (Job::Running(..), "RUNNING") => "running".to_string(),
        (Job::Running(..), _) => "not answering".to_string(),
        (Job::Ended(_), status) => status.to_string(),
    };
    PageFigures {
        state,
        snapshot: metrics(job).ok(),
        error: last_error(job, checkpoints.as_ref()),
        checkpoints,
        stoppable: matches!(job, Job::Running(..)),
    }
}

/// `POST /jobs/ID/stop`.
fn stop(job: &Job) -> Result<HttpAnswer, Refusal> {
    let entry = running(job)?;
    asked(entry, registry::stop_job(&entry.socket))?;
    Ok(json(
        StatusCode::ACCEPTED,
        &serde_json::json!({ "id": entry.id, "status": "STOPPING" }),
    ))
}

/// `POST /jobs/ID/savepoint` with `body`.
fn savepoint(job: &Job, body: &[u8]) -> Result<HttpAnswer, Refusal> {
    let entry = running(job)?;
    let ask: SavepointAsk = match body.iter().all(u8::is_ascii_whitespace) {
        true => SavepointAsk::default(),
        false => serde_json::from_slice(body).map_err(|error| {
            Refusal(
                StatusCode::BAD_REQUEST,
                format!("the body is not {{\"target-directory\": \"/absolute/dir\"}}: {error}"),
            )
        })?,
    };
    let kept = asked(
        entry,
        registry::savepoint_of(&entry.socket, ask.target_directory, SAVEPOINT_WAIT),
    )?
    .map_err(|why| {
        Refusal(
            StatusCode::CONFLICT,
            format!("job '{}' kept no savepoint: {why}", entry.id),
        )
    })?;
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({ "id": entry.id, "location": kept }),
    ))
}
