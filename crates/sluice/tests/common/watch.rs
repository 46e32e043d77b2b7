//! The watchers of a running job, run for real: `sluice ui` (its REST API) and `sluice top`
//! (under a tmux server of the test's own, since it needs a terminal), each over a test's own
//! job registry.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{http, signal, sluice_in};

/// Generous bound on each wait (a hang, not a slow machine, should trip it).
const PATIENCE: Duration = Duration::from_secs(60);

/// A private directory for a test's job registry (mode 0700, as `XDG_RUNTIME_DIR` is).
pub fn private_registry() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// Calls `ask` until it gives something, at most [`PATIENCE`].
pub fn until<T>(what: &str, mut ask: impl FnMut() -> Option<T>) -> T {
    let began = Instant::now();
    loop {
        if let Some(found) = ask() {
            return found;
        }
        assert!(began.elapsed() < PATIENCE, "never: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A running `sluice ui`, ended (as Ctrl-C ends it) when dropped.
pub struct Ui {
    child: Child,
    /// Where to reach it: `127.0.0.1:PORT`.
    pub address: String,
}

impl Ui {
    /// `sluice ui ADDRESS` (port 0) over `registry`, with `SLUICE_UI_TOKEN` set to `token`.
    pub fn start(registry: &Path, address: &str, token: Option<&str>) -> Ui {
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
    pub fn call(&self, method: &str, path: &str, headers: &[&str], body: &str) -> (u16, Value) {
        let (status, _, body) = http(&self.address, method, path, headers, body);
        let code = status.split(' ').nth(1).unwrap().parse().unwrap();
        let json = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        (code, json)
    }

    /// `GET path`, checked to be answered 200: its JSON.
    pub fn get(&self, path: &str) -> Value {
        let (code, json) = self.call("GET", path, &[], "");
        assert_eq!(code, 200, "GET {path}: {json}");
        json
    }

    /// The job `id` as `GET /jobs` lists it, if it does (the first listed without `id`).
    pub fn listed(&self, id: Option<&str>) -> Option<Value> {
        let jobs = self.get("/jobs");
        jobs["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| id.is_none_or(|id| j["id"] == id))
            .cloned()
    }

    /// Waits until a job is listed running with its sources' rate and `pes` PEs reporting
    /// their figures: its ID.
    pub fn running_job(&self, pes: usize) -> String {
        let job = until("the job listed as running with its rate", || {
            self.listed(None)
                .filter(|j| j["status"] == "RUNNING" && j["source-rate"].is_f64())
        });
        let id = job["id"].as_str().unwrap().to_string();
        until("every PE reporting", || {
            let metrics = self.get(&format!("/jobs/{id}/metrics"));
            (metrics["pes"].as_array().unwrap().len() == pes).then_some(())
        });
        id
    }

    /// Stops the job `id` by `POST /jobs/ID/stop` and waits until `job`, its process, ended
    /// well: its output.
    pub fn stop_by_post(&self, id: &str, job: Child) -> Output {
        let (code, stopping) = self.call("POST", &format!("/jobs/{id}/stop"), &[], "");
        assert_eq!(code, 202, "{stopping}");
        assert_eq!(stopping["status"], "STOPPING");
        let o = super::finish(job);
        assert!(o.status.success(), "{}", super::stderr(&o));
        o
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        signal(self.child.id(), "INT");
        let _ = self.child.wait();
    }
}

/// Whether tmux is installed.
pub fn have_tmux() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A command in a terminal of 132 by 40 cells of a tmux server of its own (no user's session
/// is touched), which keeps showing what the command wrote after it ended; the server is
/// killed when dropped.
pub struct Terminal {
    server: String,
}

impl Terminal {
    /// Runs `command`, a shell command line, in a tmux server named after `test`.
    pub fn start(command: &str, test: &str) -> Terminal {
        let terminal = Terminal {
            server: format!("sluice-{test}-{}", std::process::id()),
        };
        let started = terminal.tmux(&[
            "new-session",
            "-d",
            "-s",
            "main",
            "-x",
            "132",
            "-y",
            "40",
            command,
            ";",
            "set-option",
            "-t",
            "main",
            "remain-on-exit",
            "on",
        ]);
        assert!(started.status.success(), "{started:?}");
        terminal
    }

    /// `sluice top id --interval 0.3` over `registry`, named after `test`.
    pub fn top(registry: &Path, id: &str, test: &str) -> Terminal {
        let command = format!(
            "env XDG_RUNTIME_DIR='{}' '{}' top {id} --interval 0.3",
            registry.display(),
            env!("CARGO_BIN_EXE_sluice")
        );
        Terminal::start(&command, test)
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.server])
            .args(args)
            .output()
            .unwrap()
    }

    /// What the terminal shows now.
    pub fn screen(&self) -> Option<String> {
        String::from_utf8(self.tmux(&["capture-pane", "-p", "-t", "main"]).stdout).ok()
    }

    /// Waits until the screen shows `text`: the screen.
    pub fn shown(&self, text: &str) -> String {
        until(&format!("the terminal to show {text:?}"), || {
            self.screen().filter(|screen| screen.contains(text))
        })
    }

    /// Waits until the screen shows `operator` with a rate above 0 in its IN/S column (`sluice
    /// top`'s): the screen.
    pub fn rate_shown(&self, operator: &str) -> String {
        until(&format!("top to show {operator}'s rate"), || {
            let screen = self.screen()?;
            let row = screen
                .lines()
                .find(|l| l.contains(&format!("│{operator} ")))?;
            let mut cells = row
                .trim_matches(|c| c == '│' || c == ' ')
                .split_whitespace();
            let (_, _, rate) = (cells.next()?, cells.next()?, cells.next()?);
            let rate: u64 = rate.replace(',', "").parse().ok()?;
            (rate > 0).then_some(screen)
        })
    }

    /// Waits until the command has ended.
    pub fn ended(&self) {
        until("the command to end", || {
            let dead = self.tmux(&["display-message", "-p", "-t", "main", "#{pane_dead}"]);
            (String::from_utf8_lossy(&dead.stdout).trim() == "1").then_some(())
        });
    }

    /// Quits it with `q` (as `sluice top` quits) and waits until it has.
    pub fn quit(self) {
        self.tmux(&["send-keys", "-t", "main", "q"]);
        self.ended();
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}
