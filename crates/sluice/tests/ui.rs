//! `sluice run --ui ADDRESS:PORT`: the web page of a running job, loaded in headless Chromium
//! (its DOM after the page's script ran names every operator and shows rates, and a
//! checkpointed job's panel of checkpoints; a screenshot is taken), its self-contained page and JSON over plain HTTP, and a busy address refused
//! before the job starts. The Chromium test skips, saying why, where `chromium` is absent (and fails so under `CI=true`).

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::{browse, chromium, signal, stderr};

/// The instances of WordCount's plan under `processes`.
const INSTANCES: [&str; 4] = ["sentences", "split", "sum", "counts"];

/// A port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts WordCount under `processes` with its page on `port` and `extra` arguments, until
/// stopped, and waits until its sources run.
fn start(port: u16, extra: &[&str]) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command
        .args(["run", "wordcount", "--plan", "processes", "--rate", "2000"])
        .args(["--duration", "120", "--ui", &format!("127.0.0.1:{port}")])
        .args(extra);
    common::start_and_wait(command)
}

/// Stops the job as Ctrl-C does and checks it drained and ended well.
fn stop(child: Child) {
    signal(child.id(), "INT");
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// The body of `GET path` on `port`, after checking the status is 200.
fn get(port: u16, path: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

#[test]
fn chromium_shows_the_plan_with_live_rates() {
    let Some(browser) = chromium() else {
        sluice_skip::skip("no chromium on PATH (Debian's `chromium` package; .ci/run installs it)");
        return;
    };
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let checkpoints = dir.path().join("checkpoints");
    let job = start(
        port,
        &[
            "--checkpoint-every",
            "200ms",
            "--checkpoint-dir",
            checkpoints.to_str().unwrap(),
        ],
    );
    let url = format!("http://127.0.0.1:{port}/");
    // The first figures come with the PEs' first samples; a page loaded before shows none yet.
    let deadline = Instant::now() + Duration::from_secs(60);
    let dom = loop {
        let dom = browse(&browser, dir.path(), &url, "--dump-dom");
        if dom.contains("4 PE(s) reporting") || Instant::now() > deadline {
            break dom;
        }
    };
    // The dumped DOM is HTML after the script ran: its text has the figures.
    assert!(dom.contains("running "), "{dom}");
    assert!(dom.contains("4 PE(s) reporting"), "{dom}");
    for instance in INSTANCES {
        assert!(
            dom.contains(&format!("<td>{instance}</td>")),
            "no row for {instance}: {dom}"
        );
        assert!(dom.contains(&format!("data-op=\"{instance}\"")), "{dom}");
    }
    // The checkpoints' panel, shown.
    assert!(dom.contains("<section id=\"checkpoints\">"), "{dom}");
    for row in ["complete", "failed", "restarts"] {
        assert!(dom.contains(&format!("<td>{row}</td>")), "{dom}");
    }
    // A rate on the drawing (an instance's live line) and in the status line.
    assert!(dom.contains(">out "), "{dom}");
    assert!(dom.contains("k/s") || dom.contains("/s ·"), "{dom}");

    let screenshot = dir.path().join("page.png");
    browse(
        &browser,
        dir.path(),
        &url,
        &format!("--screenshot={}", screenshot.display()),
    );
    let png = std::fs::read(&screenshot).expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    stop(job);
}

#[test]
fn the_page_is_self_contained_and_its_json_has_the_figures() {
    let port = free_port();
    let job = start(port, &[]);
    let page = get(port, "/");
    assert!(page.starts_with("<!doctype html>"), "{page}");
    for external in ["src=\"http", "href=\"http", "@import", "url(http"] {
        assert!(!page.contains(external), "the page loads {external}");
    }
    for instance in INSTANCES {
        assert!(page.contains(&format!("data-op=\"{instance}\"")));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let snapshot = loop {
        let json: serde_json::Value = serde_json::from_str(&get(port, "/snapshot.json")).unwrap();
        let pes = json["snapshot"]["pes"].as_array().map_or(0, Vec::len);
        if pes == INSTANCES.len() || Instant::now() > deadline {
            break json;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(snapshot["state"], "running", "{snapshot}");
    assert_eq!(snapshot["snapshot"]["job"], "wordcount", "{snapshot}");
    assert!(get(port, "/plan.svg").starts_with("<svg"));
    stop(job);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the page is still served after the job ended"
    );
}

#[test]
fn a_busy_address_fails_the_run_before_it_starts() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let o = common::sluice(&["run", "wordcount", "--duration", "1", "--ui", &address]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!(
            "error: cannot serve the web page on {address} (--ui)"
        )),
        "{err}"
    );
    assert!(!err.contains("started:"), "{err}");
}

/// The threads of process `pid` now, from `/proc`.
fn threads(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a Threads: line")
}

/// Everything `stream` gets until the server closes it; a watchdog fails a server that
/// never does.
fn until_closed(mut stream: TcpStream) -> String {
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        Ok(_) => {}
        // Closed with our bytes unread: a reset.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the server kept a connection open: {e}"),
    }
    String::from_utf8_lossy(&answer).into_owned()
}

/// Idle connections cost the launcher no thread each and are all closed (those over
/// MAX_CONNECTIONS at once answered 503, the others at REQUEST_DEADLINE); a request whose
/// headers pass MAX_HEADER_BYTES is answered 431; the page is served throughout after.
#[test]
fn idle_clients_and_huge_headers_are_bounded_and_the_page_lives_on() {
    let port = free_port();
    let job = start(port, &[]);
    get(port, "/");
    let before = threads(job.id());
    let idle: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    // The server accepts in order: once a later connection is answered, all 300 were taken.
    until_closed({
        let mut last = TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            last,
            "GET /plan.svg HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        last
    });
    let during = threads(job.id());
    assert!(
        during <= before + 8,
        "{before} threads before 300 idle connections, {during} with them"
    );
    for stream in idle {
        let answer = until_closed(stream);
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 503"),
            "an idle client was answered: {answer}"
        );
    }

    let mut huge = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let header = "a".repeat(64 << 10);
    // The server may close before reading it all; its answer is read all the same.
    let _ = write!(
        huge,
        "GET / HTTP/1.1\r\nHost: x\r\nX-Huge: {header}\r\n\r\n"
    );
    let answer = until_closed(huge);
    assert!(
        answer.starts_with("HTTP/1.1 431"),
        "a 64 KiB header was answered: {}",
        answer.lines().next().unwrap_or_default()
    );
    assert!(get(port, "/").starts_with("<!doctype html>"));
    stop(job);
}
