//! `sluice ui`: the REST API and the pages of every job of a host, against real jobs in a
//! registry of the test's own (its own `XDG_RUNTIME_DIR`): a running job listed, its metrics,
//! checkpoints and a savepoint read, stopped by `POST /jobs/ID/stop`, then listed as ended
//! with its summary; a job failed by a PE's SIGKILL listed with its error; off loopback, every request without the token answered `401`; and the
//! pages in headless Chromium (the Chromium test skips, saying why, where `chromium` is
//! absent, and fails so under `CI=true`), screenshots kept in the target's temporary
//! directory (`jobs_ui/*.png`).

mod common;

use std::path::Path;
use std::process::Child;
use std::time::Instant;

use common::watch::{private_registry as registry, until, Ui};
use common::{browse, chromium, http, sluice_in, start_and_wait, stderr};

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

#[test]
fn the_rest_api_lists_watches_savepoints_and_stops_a_real_job_then_keeps_its_summary() {
    let registry = registry();
    let dir = tempfile::tempdir().unwrap();
    let ui = Ui::start(registry.path(), "127.0.0.1:0", None);
    assert_eq!(ui.get("/jobs"), serde_json::json!({ "jobs": [] }));
    let job = start_job(registry.path(), dir.path());
    let id = ui.running_job(4);
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
    let checkpoints = until("a checkpoint complete", || {
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

    ui.stop_by_post(&id, job);
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
    let id = ui.running_job(4);
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
    let dom = until("the job's page with every PE's figures", || {
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

    ui.stop_by_post(&id, job);
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
    let id = ui.running_job(4);
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
