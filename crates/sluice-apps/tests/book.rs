//! The book (`docs/`, an mdBook) and the README hold together without building the book:
//! every chapter is in the summary and every file the summary names exists; every chapter is
//! doc-tested (`sluice_apps::book`), so its Rust blocks compile and run; a Rust block that is
//! not doc-tested is an include of an example a test compiles in; every include and every
//! relative link resolves, to the heading too when it names one; and the README's and the
//! book's crate and application tables are the workspace's crates and the registry's
//! applications.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The book's source directory.
fn src() -> PathBuf {
    root().join("docs/src")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The chapters the summary names, as paths under `docs/src`.
fn summary_chapters() -> Vec<String> {
    let summary = read(&src().join("SUMMARY.md"));
    links(&summary)
        .into_iter()
        .map(|(target, _)| target)
        .collect()
}

/// Every Markdown file under `docs/src` but the summary, as paths under it.
fn chapter_files() -> BTreeSet<String> {
    fn walk(dir: &Path, base: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, base, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                let relative = path
                    .strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                if relative != "SUMMARY.md" {
                    out.insert(relative);
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(&src(), &src(), &mut out);
    out
}

/// The lines of `text` outside fenced code blocks, and the fenced blocks as (info, body).
fn split_fences(text: &str) -> (Vec<&str>, Vec<(String, Vec<&str>)>) {
    let (mut prose, mut blocks) = (Vec::new(), Vec::new());
    let mut open: Option<(String, Vec<&str>)> = None;
    for line in text.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => open = Some((info.trim().to_string(), Vec::new())),
            (Some(_), Some(_)) => blocks.extend(open.take()),
            (Some((_, body)), None) => body.push(line),
            (None, None) => prose.push(line),
        }
    }
    assert!(open.is_none(), "a code block is never closed");
    (prose, blocks)
}

/// The relative links of the prose of `text` (outside code blocks and code spans): the file
/// part and the anchor, if any.
fn links(text: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for line in split_fences(text).0 {
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            let target = &rest[..end];
            if !target.contains("://") && !target.starts_with("mailto:") {
                match target.split_once('#') {
                    Some((file, anchor)) => out.push((file.to_string(), Some(anchor.to_string()))),
                    None => out.push((target.to_string(), None)),
                }
            }
        }
    }
    out
}

/// `line` with its code spans removed.
fn without_code_spans(line: &str) -> String {
    line.split('`').step_by(2).collect()
}

/// The text of the file at `path` with its mdBook includes (`{{#include FILE}}`) replaced by
/// the files, as the book shows it.
fn expanded(path: &Path) -> String {
    let dir = path.parent().unwrap();
    read(path)
        .lines()
        .map(|line| match include_target(line) {
            Some(file) => read(&dir.join(file)),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The file a line's `{{#include FILE}}` names.
fn include_target(line: &str) -> Option<&str> {
    let inner = line
        .trim()
        .strip_prefix("{{#include ")?
        .strip_suffix("}}")?;
    Some(inner.trim())
}

/// The ids mdBook gives the headings of `text`: the heading's text without its markup,
/// lowercased, spaces as `-`, other punctuation dropped.
fn heading_ids(text: &str) -> BTreeSet<String> {
    split_fences(text)
        .0
        .into_iter()
        .filter_map(|line| line.strip_prefix('#'))
        .map(|heading| {
            heading
                .replace('`', "")
                .chars()
                .filter_map(|c| match c {
                    c if c.is_alphanumeric() || c == '_' || c == '-' => {
                        Some(c.to_ascii_lowercase())
                    }
                    c if c.is_whitespace() => Some('-'),
                    _ => None,
                })
                .collect::<String>()
                .trim_start_matches('-')
                .to_string()
        })
        .collect()
}

/// The first column of each row of the table under the heading `heading` of `text`, without
/// its backticks.
fn first_column(text: &str, heading: &str) -> BTreeSet<String> {
    let text = format!("\n{text}");
    let after = text
        .split_once(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no heading {heading}"))
        .1;
    after
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|row| {
            row.split('|')
                .nth(1)
                .unwrap()
                .trim()
                .trim_matches('`')
                .to_string()
        })
        .collect()
}

/// The names of the packages under `crates/`.
fn workspace_crates() -> BTreeSet<String> {
    std::fs::read_dir(root().join("crates"))
        .unwrap()
        .filter_map(|entry| {
            let manifest = read(&entry.ok()?.path().join("Cargo.toml"));
            let name = manifest.lines().find_map(|l| l.strip_prefix("name = "))?;
            Some(name.trim_matches('"').to_string())
        })
        .collect()
}

fn registry_apps() -> BTreeSet<String> {
    sluice_apps::registry()
        .iter()
        .map(|a| a.name.to_string())
        .collect()
}

#[test]
fn the_summary_names_every_chapter_and_every_chapter_exists() {
    let named: BTreeSet<String> = summary_chapters().into_iter().collect();
    assert_eq!(
        named,
        chapter_files(),
        "the summary against the files under docs/src"
    );
}

#[test]
fn every_chapter_is_doc_tested() {
    let lib = read(&root().join("crates/sluice-apps/src/lib.rs"));
    for chapter in chapter_files() {
        assert!(
            lib.contains(&format!(" = \"{chapter}\",")),
            "{chapter} is not in sluice_apps::book: its Rust blocks would not run"
        );
    }
}

#[test]
fn a_rust_block_left_out_of_the_doc_tests_is_an_example_a_test_compiles_in() {
    let tests = std::fs::read_dir(root().join("crates/sluice/tests"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .collect::<String>();
    for chapter in chapter_files() {
        let text = read(&src().join(&chapter));
        for (info, body) in split_fences(&text).1 {
            if !info.starts_with("rust") || !info.contains("ignore") {
                continue;
            }
            for line in body {
                let file = include_target(line)
                    .unwrap_or_else(|| panic!("{chapter}: an ignored Rust block holds {line}"));
                let path = file.trim_start_matches("../");
                assert!(
                    path.starts_with("examples/"),
                    "{chapter}: {file} is no example"
                );
                assert!(
                    tests.contains(&format!("#[path = \"../../../{path}\"]")),
                    "{chapter}: no test in crates/sluice/tests compiles {path} in"
                );
            }
        }
    }
}

#[test]
fn every_include_and_link_resolves() {
    let mut sources: Vec<PathBuf> = chapter_files().iter().map(|c| src().join(c)).collect();
    sources.push(root().join("README.md"));
    for source in sources {
        let dir = source.parent().unwrap();
        let text = read(&source);
        for line in text.lines() {
            if let Some(file) = include_target(line) {
                assert!(
                    dir.join(file).is_file(),
                    "{}: no {file} to include",
                    source.display()
                );
            }
        }
        for (file, anchor) in links(&text) {
            let target = if file.is_empty() {
                source.clone()
            } else {
                dir.join(&file)
            };
            assert!(
                target.exists(),
                "{}: the link to {file} leads nowhere",
                source.display()
            );
            if let Some(anchor) = anchor {
                assert!(
                    heading_ids(&expanded(&target)).contains(&anchor),
                    "{}: {file} has no heading #{anchor}",
                    source.display()
                );
            }
        }
    }
}

#[test]
fn the_readme_and_the_book_list_the_workspace_s_crates() {
    let crates = workspace_crates();
    let readme = read(&root().join("README.md"));
    assert_eq!(
        first_column(&readme, "## The crates"),
        crates,
        "README.md's crate table"
    );
    let book = read(&src().join("contributing/crates.md"));
    assert_eq!(
        first_column(&book, "# The crates"),
        crates,
        "the book's crate table"
    );
}

#[test]
fn the_readme_and_the_book_list_the_registry_s_applications() {
    let apps = registry_apps();
    let readme = read(&root().join("README.md"));
    assert_eq!(
        first_column(&readme, "## The applications"),
        apps,
        "README.md's applications"
    );
    let book = read(&src().join("applications.md"));
    assert_eq!(
        first_column(&book, "# The applications"),
        apps,
        "the book's applications"
    );
}

#[test]
fn heading_ids_are_mdbook_s() {
    let ids = heading_ids("# How `sluice bench` measures\n## Live metrics' overhead (issue 19)\n```sh\n# not a heading\n```\n");
    let expected = [
        "how-sluice-bench-measures",
        "live-metrics-overhead-issue-19",
    ];
    assert_eq!(ids, expected.map(String::from).into_iter().collect());
}
