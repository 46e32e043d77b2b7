//! `sluice feed` as a user meets it: record a feed, print it, send it (generated and replayed)
//! to local UDP sockets, and one-line errors (never a panic) for bad input.

use std::net::UdpSocket;
use std::process::{Command, Output};
use std::time::Duration;

/// Runs `sluice` with `args`: its exit code, standard output and standard error.
fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let o: Output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("sluice runs");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (o.status.code(), text(&o.stdout), text(&o.stderr))
}

/// Two local sockets and their addresses as `--to` takes them.
fn receivers() -> (Vec<UdpSocket>, String) {
    let sockets: Vec<UdpSocket> = (0..2)
        .map(|_| {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            s.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            s
        })
        .collect();
    let to = sockets
        .iter()
        .map(|s| s.local_addr().unwrap().to_string())
        .collect::<Vec<_>>()
        .join(",");
    (sockets, to)
}

fn count_received(socket: &UdpSocket) -> usize {
    let mut buffer = [0u8; 2048];
    let mut n = 0;
    while socket.recv(&mut buffer).is_ok() {
        n += 1;
    }
    n
}

/// Runs `sluice` with `args`, which must succeed; returns its standard output.
fn succeed(args: &[&str]) -> String {
    let (code, out, err) = run(args);
    assert_eq!(code, Some(0), "{args:?}: {err}");
    out
}

#[test]
fn record_dump_and_send_generated_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("feed.rec");
    let file = file.to_str().unwrap();
    let out = succeed(&["feed", "record", file, "--packets", "40", "--channels", "2"]);
    assert!(out.starts_with("recorded 40 packets ("), "{out}");

    let out = succeed(&["feed", "dump", file, "--packets", "2"]);
    assert!(
        out.starts_with("generated with --channels 2 --underlyings 2000 "),
        "{out}"
    );
    assert!(out.contains("\nchannel 0 packet 1 at 0 ns: "), "{out}");
    assert!(out.contains("\nchannel 1 packet 1 at 41666 ns: "), "{out}");
    assert!(out.contains(" quote underlying "), "{out}");

    let (sockets, to) = receivers();
    // Settings may repeat the recording's, not contradict them.
    let (code, _, err) = run(&["feed", "send", "--to", &to, "--replay", file, "--seed", "9"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("disagree with the recording"), "{err}");
    let out = succeed(&[
        "feed",
        "send",
        "--to",
        &to,
        "--replay",
        file,
        "--channels",
        "2",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["packets"], 40);
    assert_eq!(report["packets_per_channel"], serde_json::json!([20, 20]));
    assert_eq!(
        count_received(&sockets[0]) + count_received(&sockets[1]),
        40
    );

    let (sockets, to) = receivers();
    let out = succeed(&[
        "feed",
        "send",
        "--to",
        &to,
        "--channels",
        "2",
        "--packets",
        "30",
        "--rate-multiple",
        "2",
    ]);
    assert!(out.starts_with("sent 30 packets ("), "{out}");
    assert_eq!(
        count_received(&sockets[0]) + count_received(&sockets[1]),
        30
    );
}

#[test]
fn every_feed_command_has_help() {
    for command in ["send", "record", "dump"] {
        let out = succeed(&["feed", command, "--help"]);
        assert!(out.contains("Usage: sluice feed"), "{command}: {out}");
    }
}

#[test]
fn bad_input_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_recording = dir.path().join("x");
    std::fs::write(&not_a_recording, "hello, world, this is not a feed").unwrap();
    let not_a_recording = not_a_recording.to_str().unwrap();
    for (args, expected) in [
        (vec!["feed", "dump", not_a_recording], "not a recorded feed"),
        (
            vec!["feed", "send", "--to", "127.0.0.1:9", "--packets", "1"],
            "a feed of 4 channels needs 4 unicast addresses",
        ),
        (
            vec!["feed", "send", "--rate-multiple", "0", "--packets", "1"],
            "the rate multiple must be positive",
        ),
        (
            vec![
                "feed",
                "record",
                not_a_recording,
                "--packets",
                "1",
                "--messages-per-packet",
                "99",
            ],
            "messages per packet must be 1 to 26",
        ),
        (
            vec!["feed", "send", "--group", "10.0.0.1", "--packets", "1"],
            "is not a multicast address",
        ),
    ] {
        let (code, _, err) = run(&args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(
            err.lines().any(|l| l.starts_with("error: ")),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
