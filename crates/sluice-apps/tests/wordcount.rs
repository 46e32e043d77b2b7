//! WordCount end to end: the counts written under every plan (fused, auto, threaded and a
//! process per instance, with more instances than the two cores planned for) equal a
//! reference computed here independently of the application's own tokenizer.

use std::collections::BTreeMap;
use std::path::Path;

use sluice_apps::{AppConfig, Settings};
use sluice_plan::{plan, PlanFile, PlanOptions, PlanRequest};
use sluice_runtime::{run, Launcher, RunOptions};
use sluice_sync::IdleStrategy;

/// A text with punctuation, case, blank lines, tabs and non-ASCII words.
fn corpus() -> String {
    let mut text = String::new();
    let lines = [
        "The quick brown fox -- jumps over the lazy dog!",
        "\"Hello,\" said the FOX; 'hello' said the dog.",
        "",
        "   ...   !!!   ",
        "Ünïcode Straße straße ÜNÏCODE, naïve café.",
        "e-mail isn't (really) e-mail... is it?",
        "\tTabs\tand  double  spaces\t",
    ];
    for i in 0..400 {
        text.push_str(lines[i % lines.len()]);
        text.push_str(&format!(" w{}\n", i % 37));
    }
    text
}

/// The reference: a character-level scan, written without `split_whitespace` or `trim_matches`.
fn reference(text: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    let mut token = String::new();
    let mut flush = |token: &mut String| {
        let chars: Vec<char> = token.chars().collect();
        let mut start = 0;
        let mut end = chars.len();
        while start < end && chars[start].is_ascii_punctuation() {
            start += 1;
        }
        while end > start && chars[end - 1].is_ascii_punctuation() {
            end -= 1;
        }
        if start < end {
            let word: String = chars[start..end]
                .iter()
                .flat_map(|c| c.to_lowercase())
                .collect();
            *counts.entry(word).or_insert(0) += 1;
        }
        token.clear();
    };
    for c in text.chars() {
        if c.is_whitespace() {
            flush(&mut token);
        } else {
            token.push(c);
        }
    }
    flush(&mut token);
    counts
}

fn read_counts(path: &Path) -> BTreeMap<String, u64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let (word, count) = line.split_once('\t').expect("word<TAB>count");
            (word.to_string(), count.parse().unwrap())
        })
        .collect()
}

fn run_wordcount(
    input: &Path,
    output: &Path,
    request: PlanRequest,
    parallelism: usize,
    idle: Option<IdleStrategy>,
) {
    let config = AppConfig {
        input: Some(input.to_path_buf()),
        output: Some(output.to_path_buf()),
        settings: Settings::parse([format!("parallelism={parallelism}").as_str()]).unwrap(),
        ..AppConfig::default()
    };
    let app = sluice_apps::build("wordcount", &config).unwrap();
    let p = plan(
        &app.graph,
        &request,
        &PlanOptions {
            cores: 2,
            queue_capacity: 32,
            ..PlanOptions::default()
        },
    )
    .unwrap();
    let options = RunOptions {
        idle,
        // A process per instance runs its PEs as threads of the test.
        launcher: Launcher::InProcess,
        ..RunOptions::default()
    };
    let report = run(&app.graph, &p, &options).unwrap();
    assert_eq!(report.tuples_out("sentences"), 400);
    let summary = (app.summarize)(&report);
    assert!(summary.contains("p99.9"), "{summary}");
}

#[test]
fn counts_equal_the_reference_under_every_plan() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("corpus.txt");
    let text = corpus();
    std::fs::write(&input, &text).unwrap();
    let expected = reference(&text);
    // Sanity of the reference itself: lines 0 and 1 (58 and 57 times) hold "the" twice each.
    assert_eq!(expected["the"], 2 * 58 + 2 * 57);
    assert_eq!(expected["straße"], 2 * 57);
    assert_eq!(expected["e-mail"], 2 * 57);
    let mixed = PlanFile::parse(
        "queue_capacity = 8\n[[thread]]\nname='ingest'\noperators=['sentences','split']\n\
         [[thread]]\nname='count0'\noperators=['sum[0]','sum[1]']\n\
         [[thread]]\nname='count1'\noperators=['sum[2]','counts']\n",
    )
    .unwrap();
    // Threads parking on their receivers' doorbells (one receiver each when threaded; several
    // in the mixed plan's count threads) and on full queues (capacities of 8 and 32).
    let park = Some(IdleStrategy::Park);
    let cases = [
        ("fused", PlanRequest::Fused, 1, None),
        ("threaded", PlanRequest::Threaded, 1, None),
        ("fused-x3", PlanRequest::Fused, 3, None),
        ("threaded-x3", PlanRequest::Threaded, 3, None),
        ("auto", PlanRequest::Auto, 1, None),
        ("auto-x3", PlanRequest::Auto, 3, None),
        ("processes-x3", PlanRequest::Processes, 3, None),
        (
            "mixed-x3",
            PlanRequest::File("mixed".into(), mixed.clone()),
            3,
            None,
        ),
        ("threaded-x3-park", PlanRequest::Threaded, 3, park),
        (
            "mixed-x3-park",
            PlanRequest::File("mixed".into(), mixed),
            3,
            park,
        ),
    ];
    for (name, request, parallelism, idle) in cases {
        let output = dir.path().join(format!("{name}.tsv"));
        run_wordcount(&input, &output, request, parallelism, idle);
        assert_eq!(read_counts(&output), expected, "plan {name}");
    }
}

#[test]
fn auto_on_two_cores_is_fused_at_the_default_rate_and_the_two_thread_split_flat_out() {
    let app = sluice_apps::build("wordcount", &AppConfig::default()).unwrap();
    let threads_at = |source_rate| {
        let options = PlanOptions {
            cores: 2,
            source_rate,
            ..PlanOptions::default()
        };
        let p = plan(&app.graph, &PlanRequest::Auto, &options).unwrap();
        let threads: Vec<Vec<String>> = p
            .threads()
            .map(|t| {
                let names = t.instances.iter().map(|i| p.instance(*i).name.clone());
                names.collect()
            })
            .collect();
        threads
    };
    // `sluice run wordcount`'s default: 100,000 sentences/s of ten words, a tenth of a core
    // by the declared costs.
    assert_eq!(
        threads_at(Some(100_000)),
        [["sentences", "split", "sum", "counts"]]
    );
    // As fast as it goes (`--rate 0`, or a file): the cut of the `two-threads` plan it ships.
    let two_threads = [["sentences", "split"], ["sum", "counts"]];
    assert_eq!(threads_at(None), two_threads);
    // Past half a core fused: 600,000 sentences/s.
    assert_eq!(threads_at(Some(600_000)), two_threads);
}

#[test]
fn sizes_beyond_their_bounds_are_refused_before_anything_is_made() {
    for (setting, message) in [
        (
            "parallelism=1025",
            "setting parallelism: 1025 is out of range: must be between 1 and 1024",
        ),
        (
            "words=0",
            "setting words: 0 is out of range: must be between 1 and 65536",
        ),
        (
            "vocabulary=1099511627776",
            "setting vocabulary: 1099511627776 is out of range: must be between 1 and 16777216",
        ),
    ] {
        let config = AppConfig {
            settings: Settings::parse([setting]).unwrap(),
            ..AppConfig::default()
        };
        let error = sluice_apps::build("wordcount", &config)
            .err()
            .expect(setting);
        assert_eq!(error.to_string(), message);
    }
}
