//! `sluice ui`: the REST API and the pages of every job of a host, against real jobs in a
//! registry of the test's own (its own `XDG_RUNTIME_DIR`): a running job listed, its metrics,
//! checkpoints and a savepoint read, stopped by `POST /jobs/ID/stop`, then listed as ended
//! with its summary; a job failed by a PE's SIGKILL listed with its error; off loopback, every request without the token answered `401`; and the
//! pages in headless Chromium (the Chromium test skips, saying why, where `chromium` is
//! absent, and fails so under `CI=true`), screenshots kept in the target's temporary
//! directory (`jobs_ui/*.png`).

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{browse, chromium, finish, http, signal, sluice_in, start_and_wait, stderr};
use serde_json::Value;

/// Generous bound on each wait (a hang, not a slow machine, should trip it).
const PATIENCE: Duration = Duration::from_secs(60);

/// A private directory for a test's job registry (mode 0700, as `XDG_RUNTIME_DIR` is).
fn registry() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// A running `sluice ui`, ended (as Ctrl-C ends it) when dropped.
struct Ui {
    child: Child,
    /// Where to reach it: `127.0.0.1:PORT`.
    address: String,
}

impl Ui {
    /// `sluice ui ADDRESS` (port 0) over `registry`, with `SLUICE_UI_TOKEN` set to `token`.
    fn start(registry: &Path, address: &str, token: Option<&str>) -> Ui {
        let mut command = sluice_in(registry);
        command.args(["ui", address]).env_remove("SLUICE_UI_TOKEN");
        if let Some(token) = token {
            command.env("SLUICE_UI_TOKEN", token);
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (said, heard) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = said.send(line);
        });
        let line = heard
            .recv_timeout(PATIENCE)
            .expect("sluice ui said its address");
        // `ui: http://ADDRESS:PORT/ ...`; a wildcard address is reached on loopback.
        let bound = line
            .strip_prefix("ui: http://")
            .and_then(|rest| rest.split_once('/'))
            .map(|(address, _)| address.to_string())
            .unwrap_or_else(|| panic!("not the address: {line}"));
        let port = bound.rsplit_once(':').unwrap().1;
        Ui {
            child,
            address: format!("127.0.0.1:{port}"),
        }
    }

    /// `METHOD path` with `headers` and `body`: the status code and the JSON answered.
    fn call(&self, method: &str, path: &str, headers: &[&str], body: &str) -> (u16, Value) {
        let (status, _, body) = http(&self.address, method, path, headers, body);
        let code = status.split(' ').nth(1).unwrap().parse().unwrap();
        let json = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        (code, json)
    }

    /// `GET path`, checked to be answered 200: its JSON.
    fn get(&self, path: &str) -> Value {
        let (code, json) = self.call("GET", path, &[], "");
        assert_eq!(code, 200, "GET {path}: {json}");
        json
    }

    /// The job `id` as `GET /jobs` lists it, if it does.
    fn listed(&self, id: Option<&str>) -> Option<Value> {
        let jobs = self.get("/jobs");
        jobs["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| id.is_none_or(|id| j["id"] == id))
            .cloned()
    }

    /// Calls `ask` until it gives something, at most [`PATIENCE`].
    fn until<T>(&self, what: &str, mut ask: impl FnMut(&Ui) -> Option<T>) -> T {
        let began = Instant::now();
        loop {
            if let Some(found) = ask(self) {
                return found;
            }
            assert!(began.elapsed() < PATIENCE, "never: {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        signal(self.child.id(), "INT");
        let _ = self.child.wait();
    }
}

/// Starts WordCount under `processes` (4 PEs), checkpointed every 200 ms into `dir`, until
/// stopped, with its registry in `registry`; waits until its sources run.
fn start_job(registry: &Path, dir: &Path) -> Child {
    let mut command = sluice_in(registry);
    command
        .args(["run", "wordcount", "--plan", "processes", "--rate", "2000"])
        .args(["--duration", "120", "--checkpoint-every", "200ms"])
        .arg("--checkpoint-dir")
        .arg(dir.join("checkpoints"));
    start_and_wait(command)
}

/// Waits until the running job is listed with its figures and every PE reports: its ID.
fn running_job(ui: &Ui) -> String {
    let job = ui.until("the job listed as running with its rate", |ui| {
        ui.listed(None)
            .filter(|j| j["status"] == "RUNNING" && j["source-rate"].is_f64())
    });
    let id = job["id"].as_str().unwrap().to_string();
    ui.until("every PE reporting", |ui| {
        let metrics = ui.get(&format!("/jobs/{id}/metrics"));
        (metrics["pes"].as_array().unwrap().len() == 4).then_some(())
    });
    id
}

/// Stops the job `id` by `POST /jobs/ID/stop` and waits until `job` ended well.
fn stop_by_post(ui: &Ui, id: &str, job: Child) {
    let (code, stopping) = ui.call("POST", &format!("/jobs/{id}/stop"), &[], "");
    assert_eq!(code, 202, "{stopping}");
    assert_eq!(stopping["status"], "STOPPING");
    let o = finish(job);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn the_rest_api_lists_watches_savepoints_and_stops_a_real_job_then_keeps_its_summary() {
    let registry = registry();
    let dir = tempfile::tempdir().unwrap();
    let ui = Ui::start(registry.path(), "127.0.0.1:0", None);
    assert_eq!(ui.get("/jobs"), serde_json::json!({ "jobs": [] }));
    let job = start_job(registry.path(), dir.path());
    let id = running_job(&ui);
    let listed = ui.listed(Some(&id)).unwrap();
    assert_eq!(listed["name"], "wordcount", "{listed}");
    assert_eq!(listed["plan"], "processes", "{listed}");
    assert_eq!(listed["pes"], 4, "{listed}");
    assert!(listed["end-time"].is_null(), "{listed}");

    let detail = ui.get(&format!("/jobs/{id}"));
    assert_eq!(detail["status"], "RUNNING", "{detail}");
    assert_eq!(detail["plan"]["instances"].as_array().unwrap().len(), 4);
    assert!(detail["error"].is_null(), "{detail}");
    let metrics = ui.get(&format!("/jobs/{id}/metrics"));
    assert_eq!(metrics["job"], "wordcount", "{metrics}");
    let checkpoints = ui.until("a checkpoint complete", |ui| {
        let c = ui.get(&format!("/jobs/{id}/checkpoints"));
        (c["completed"].as_u64() >= Some(1)).then_some(c)
    });
    assert_eq!(checkpoints["failed"], 0, "{checkpoints}");

    // A savepoint where asked; a relative directory refused with the job's reason.
    let target = dir.path().join("savepoint");
    let body = serde_json::json!({ "target-directory": target }).to_string();
    let (code, kept) = ui.call("POST", &format!("/jobs/{id}/savepoint"), &[], &body);
    assert_eq!(code, 200, "{kept}");
    assert_eq!(kept["location"], target.to_str().unwrap(), "{kept}");
    assert!(target.is_dir());
    let relative = r#"{"target-directory": "here"}"#;
    let (code, refused) = ui.call("POST", &format!("/jobs/{id}/savepoint"), &[], relative);
    assert_eq!(code, 409, "{refused}");
    assert!(
        refused["errors"][0].as_str().unwrap().contains("relative"),
        "{refused}"
    );
    let (code, _) = ui.call("GET", &format!("/jobs/{id}/stop"), &[], "");
    assert_eq!(code, 405);

    stop_by_post(&ui, &id, job);
    // Listed still, ended, with what was kept of it.
    let ended = ui.listed(Some(&id)).expect("the ended job is listed");
    assert_eq!(ended["status"], "STOPPED", "{ended}");
    assert!(
        ended["end-time"].as_u64() >= ended["start-time"].as_u64(),
        "{ended}"
    );
    let metrics = ui.get(&format!("/jobs/{id}/metrics"));
    assert_eq!(metrics["pes"].as_array().unwrap().len(), 4, "{metrics}");
    let checkpoints = ui.get(&format!("/jobs/{id}/checkpoints"));
    assert!(
        checkpoints["completed"].as_u64() >= Some(1),
        "{checkpoints}"
    );
    let detail = ui.get(&format!("/jobs/{id}"));
    assert_eq!(detail["plan"]["strategy"], "processes", "{detail}");
    let (code, refused) = ui.call("POST", &format!("/jobs/{id}/stop"), &[], "");
    assert_eq!(code, 409, "{refused}");
    let (code, unknown) = ui.call("GET", "/jobs/nothing-1", &[], "");
    assert_eq!(code, 404, "{unknown}");
    assert!(unknown["errors"][0].as_str().unwrap().contains("nothing-1"));
}

#[test]
fn off_loopback_every_request_needs_the_token() {
    let registry = registry();
    let refused = sluice_in(registry.path())
        .args(["ui", "0.0.0.0:0"])
        .env_remove("SLUICE_UI_TOKEN")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let err = stderr(&refused);
    assert!(
        err.contains("not a loopback address") && err.contains("SLUICE_UI_TOKEN"),
        "{err}"
    );
    let bad = sluice_in(registry.path())
        .args(["ui", "0.0.0.0:0", "--token", "a b"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).contains("the token holds ' '"),
        "{}",
        stderr(&bad)
    );

    let token = "s3cret-Token_1";
    let ui = Ui::start(registry.path(), "0.0.0.0:0", Some(token));
    let bearer = format!("Authorization: Bearer {token}");
    let cookie = format!("Cookie: other=1; sluice_ui_token={token}");
    for (method, path, headers) in [
        ("GET", "/jobs", vec![]),
        ("GET", "/", vec![]),
        ("GET", "/jobs?token=wrong", vec![]),
        ("POST", "/jobs/any-1/stop", vec![]),
        ("GET", "/jobs", vec!["Authorization: Bearer s3cret-Token_2"]),
        ("GET", "/jobs", vec!["Cookie: sluice_ui_token=s3cret"]),
    ] {
        let (status, head, _) = http(&ui.address, method, path, &headers, "");
        assert!(
            status.starts_with("HTTP/1.1 401"),
            "{method} {path}: {status}"
        );
        assert!(head.contains("www-authenticate: Bearer"), "{head}");
    }
    assert_eq!(ui.call("GET", "/jobs", &[&bearer], "").0, 200);
    assert_eq!(ui.call("GET", "/jobs", &[&cookie], "").0, 200);
    // The page opened with the token in its address sets the cookie its script's requests carry.
    let (status, head, page) = http(&ui.address, "GET", &format!("/?token={token}"), &[], "");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(page.starts_with("<!doctype html>"));
    assert!(
        head.contains(&format!(
            "set-cookie: sluice_ui_token={token}; Path=/; HttpOnly; SameSite=Strict"
        )),
        "{head}"
    );
    drop(ui);

    // The token's variable is `sluice ui`'s, not configuration `sluice run` refuses.
    let run = sluice_in(registry.path())
        .args(["run", "wordcount", "--duration", "0.5", "--quiet"])
        .env("SLUICE_UI_TOKEN", token)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", stderr(&run));
}

#[test]
fn chromium_lists_the_jobs_and_shows_a_jobs_page_before_and_after_it_ends() {
    let Some(browser) = chromium() else {
        sluice_skip::skip("no chromium on PATH (Debian's `chromium` package; .ci/run installs it)");
        return;
    };
    let registry = registry();
    let dir = tempfile::tempdir().unwrap();
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("jobs_ui");
    std::fs::create_dir_all(&shots).unwrap();
    let ui = Ui::start(registry.path(), "127.0.0.1:0", None);
    let job = start_job(registry.path(), dir.path());
    let id = running_job(&ui);
    let list = format!("http://{}/", ui.address);
    let page = format!("http://{}/jobs/{id}/", ui.address);
    let shoot = |url: &str, name: &str| {
        let png = shots.join(name);
        browse(
            &browser,
            dir.path(),
            url,
            &format!("--screenshot={}", png.display()),
        );
        let bytes = std::fs::read(&png).expect("a screenshot");
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
        eprintln!("screenshot: {}", png.display());
    };

    // The list: the job, running, linked to its page, with a stop button.
    let dom = browse(&browser, dir.path(), &list, "--dump-dom");
    assert!(
        dom.contains(&format!("<a href=\"jobs/{id}/\">{id}</a>")),
        "{dom}"
    );
    assert!(dom.contains("<td class=\"RUNNING\">RUNNING</td>"), "{dom}");
    assert!(dom.contains("<button>stop</button>"), "{dom}");
    shoot(&list, "list.png");
    // Its page: the plan with live rates, the checkpoints, a stop button.
    let dom = ui.until("the job's page with every PE's figures", |_| {
        let dom = browse(&browser, dir.path(), &page, "--dump-dom");
        dom.contains("4 PE(s) reporting").then_some(dom)
    });
    for instance in ["sentences", "split", "sum", "counts"] {
        assert!(dom.contains(&format!("<td>{instance}</td>")), "{dom}");
    }
    assert!(dom.contains("<section id=\"checkpoints\">"), "{dom}");
    assert!(dom.contains("<button id=\"stop\">stop</button>"), "{dom}");
    assert!(dom.contains(">out "), "{dom}");
    shoot(&page, "job.png");

    stop_by_post(&ui, &id, job);
    // After its end: listed as stopped, its page showing its last figures, no stop button.
    let dom = browse(&browser, dir.path(), &list, "--dump-dom");
    assert!(dom.contains("<td class=\"STOPPED\">STOPPED</td>"), "{dom}");
    assert!(!dom.contains("<button>stop</button>"), "{dom}");
    let dom = browse(&browser, dir.path(), &page, "--dump-dom");
    assert!(dom.contains("ended: STOPPED after"), "{dom}");
    assert!(dom.contains("<td>counts</td>"), "{dom}");
    assert!(dom.contains("<button id=\"stop\" hidden=\"\">"), "{dom}");
    shoot(&page, "ended.png");
}

#[test]
fn a_failed_job_is_listed_with_its_error_after_it_ended() {
    let registry = registry();
    let ui = Ui::start(registry.path(), "127.0.0.1:0", None);
    let mut command = sluice_in(registry.path());
    command.args(["run", "wordcount", "--plan", "processes", "--rate", "2000"]);
    command.args(["--duration", "120"]);
    let job = start_and_wait(command);
    let id = running_job(&ui);
    let victim = common::pes_of(job.id())
        .into_iter()
        .find(|pe| pe.index == 1)
        .expect("PE 1 runs");
    common::kill_pe_and_wait(job, victim.pid, Instant::now());
    let detail = ui.get(&format!("/jobs/{id}"));
    assert_eq!(detail["status"], "FAILED", "{detail}");
    let error = detail["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("split") && error.contains("SIGKILL"),
        "{detail}"
    );
    assert!(ui.get(&format!("/jobs/{id}/metrics"))["pes"].is_array());
}
