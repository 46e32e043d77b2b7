//! The bench crate's layers depend in one direction only: every path a module writes into the
//! crate (`crate::...`, `super::...`, `self::...`, in `use` declarations, code, macro bodies
//! and doc links) must lead to its own layer or a lower one, never to a higher one and never
//! to an item of the crate root (which only dispatches and re-exports). The sources are parsed
//! with `syn`, so a use inside an inline `mod tests { use super::*; }` resolves from that
//! module, not from its file.

use std::path::Path;

use syn::visit::Visit;

/// The layers, lowest first; a module may use its own layer and the layers below it. A module
/// belongs to the layer of the longest entry that is a prefix of its path (`a::b`).
const LAYERS: &[&[&str]] = &[
    &["foundation"],
    &["transports"],
    &["apps"],
    &["suite"],
    &["cli"],
];

/// The rank of the crate root: above every layer.
const ROOT: usize = usize::MAX;

/// The layer of the module at `path`: `Some(ROOT)` for the root, `None` if no layer holds it.
fn rank(path: &[String]) -> Option<usize> {
    if path.is_empty() {
        return Some(ROOT);
    }
    let mut best: Option<(usize, usize)> = None;
    for (rank, layer) in LAYERS.iter().enumerate() {
        for entry in layer.iter() {
            let entry: Vec<&str> = entry.split("::").collect();
            let prefix = entry.len() <= path.len() && entry.iter().zip(path).all(|(a, b)| a == b);
            if prefix && best.is_none_or(|(_, len)| entry.len() > len) {
                best = Some((rank, entry.len()));
            }
        }
    }
    best.map(|(rank, _)| rank)
}

/// The module a path written as `segments` in module `from` leads to, when it leads into the
/// crate; `None` for a path into another crate or to a local name.
fn resolve(from: &[String], segments: &[String]) -> Option<Vec<String>> {
    match segments.first()?.as_str() {
        "crate" => Some(segments[1..].to_vec()),
        "self" => Some([from, &segments[1..]].concat()),
        "super" => {
            let up = segments.iter().take_while(|s| *s == "super").count();
            let base = &from[..from.len().checked_sub(up)?];
            Some([base, &segments[up..]].concat())
        }
        _ => None,
    }
}

/// Every `crate::`, `super::` or `self::` path in free text (a macro body, a doc comment).
fn paths_in_text(text: &str) -> Vec<Vec<String>> {
    let text = text.replace(" :: ", "::");
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for (at, _) in text.match_indices("::") {
        let start = text[..at].rfind(|c: char| !ident(c)).map_or(0, |i| i + 1);
        let first = &text[start..at];
        let before = text[..start].chars().next_back();
        if !matches!(first, "crate" | "super" | "self") || before == Some(':') {
            continue;
        }
        let path: Vec<String> = text[start..]
            .split("::")
            .map_while(|s| {
                let s: String = s.chars().take_while(|c| ident(*c)).collect();
                (!s.is_empty()).then_some(s)
            })
            .collect();
        found.push(path);
    }
    found
}

/// The paths a `use` tree names, each as its segments.
fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => out.push([&prefix[..], &[n.ident.to_string()]].concat()),
        syn::UseTree::Rename(r) => out.push([&prefix[..], &[r.ident.to_string()]].concat()),
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_paths(t, prefix, out)),
    }
}

/// Collects the paths into the crate that one file writes, with the module each is written in.
struct Uses {
    module: Vec<String>,
    found: Vec<(Vec<String>, Vec<String>)>,
}

impl Uses {
    fn add(&mut self, segments: &[String]) {
        if let Some(target) = resolve(&self.module, segments) {
            self.found.push((self.module.clone(), target));
        }
    }
}

impl<'ast> Visit<'ast> for Uses {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        self.module.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.module.pop();
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut paths = Vec::new();
        use_paths(&item.tree, &mut Vec::new(), &mut paths);
        paths.iter().for_each(|p| self.add(p));
        syn::visit::visit_item_use(self, item);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.add(&segments);
        syn::visit::visit_path(self, path);
    }

    /// `pub(crate)`, `pub(super)`: a visibility, not a use.
    fn visit_vis_restricted(&mut self, _: &'ast syn::VisRestricted) {}

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        for path in paths_in_text(&mac.tokens.to_string()) {
            self.add(&path);
        }
        syn::visit::visit_macro(self, mac);
    }

    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        if let syn::Meta::NameValue(doc) = &attr.meta {
            if let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(text),
                ..
            }) = &doc.value
            {
                for path in paths_in_text(&text.value()) {
                    self.add(&path);
                }
            }
        }
        syn::visit::visit_attribute(self, attr);
    }
}

/// What breaks the layering among `files` (each a module path such as `suite::report` and
/// its source): one line per module outside every layer and per path leading upward.
fn violations(files: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (module, source) in files {
        let path: Vec<String> = module
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let Some(own) = rank(&path) else {
            found.push(format!("{module}: in no layer (add it to LAYERS)"));
            continue;
        };
        let file = match syn::parse_file(source) {
            Ok(file) => file,
            Err(e) => {
                found.push(format!("{module}: does not parse: {e}"));
                continue;
            }
        };
        let mut uses = Uses {
            module: path,
            found: Vec::new(),
        };
        uses.visit_file(&file);
        for (from, target) in uses.found {
            let to = rank(&target);
            // A path to the root's own items (its re-exports, its functions) has no layer.
            let upward = match to {
                Some(to) => to > own,
                None => own != ROOT,
            };
            if upward {
                found.push(format!(
                    "{} uses crate::{}, a higher layer",
                    from.join("::"),
                    target.join("::")
                ));
            }
        }
    }
    found
}

/// Every source file under `dir`, as (module path, text).
fn sources(dir: &Path, module: &str, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).expect("read the source directory") {
        let path = entry.expect("read a directory entry").path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let child = match (module, name.as_str()) {
            (m, "lib" | "mod") => m.to_string(),
            ("", n) => n.to_string(),
            (m, n) => format!("{m}::{n}"),
        };
        if path.is_dir() {
            sources(&path, &child, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("read a source file");
            out.push((child, text));
        }
    }
}

#[test]
fn no_module_uses_a_higher_layer() {
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        "",
        &mut files,
    );
    assert!(files.len() > 20, "found only {} source files", files.len());
    let found = violations(&files);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_check_finds_every_kind_of_upward_path() {
    let file = |module: &str, source: &str| (module.to_string(), source.to_string());
    let upward = [
        file("foundation::stats", "use crate::suite::report::Row;"),
        file(
            "foundation::stats",
            "use crate::{foundation::load, transports::measure};",
        ),
        file(
            "foundation",
            "fn f() { crate::transports::measure::measure(); }",
        ),
        file("transports::udp", "use super::super::suite::Job;"),
        file(
            "transports::udp",
            "fn f() -> super::super::cli::BenchArgs { todo!() }",
        ),
        file(
            "foundation::args",
            "/// See [`X`](crate::cli::X).\nstruct A;",
        ),
        file(
            "foundation::args",
            "fn f() { println!(\"{}\", crate::apps::NAME); }",
        ),
        file("transports::engine", "use crate::run;"),
        file("suite", "mod inner { use super::super::cli::Args; }"),
    ];
    for (module, source) in &upward {
        let found = violations(&[(module.clone(), source.clone())]);
        assert_eq!(found.len(), 1, "{source}: {found:?}");
    }
    let within = [
        file("foundation", "mod tests { use super::*; }"),
        file(
            "foundation::load",
            "pub(crate) fn f() {} pub(super) struct A;",
        ),
        file(
            "suite::report",
            "use crate::{foundation::stats, transports::measure};",
        ),
        file("suite::peers::zeromq", "use super::super::output;"),
        file(
            "transports::udp",
            "use self::inner::X; use std::io; use super::network;",
        ),
        file("", "use crate::cli::BenchArgs; use crate::suite::main;"),
    ];
    for (module, source) in &within {
        let found = violations(&[(module.clone(), source.clone())]);
        assert!(found.is_empty(), "{source}: {found:?}");
    }
    let stray = violations(&[file("extras", "")]);
    assert_eq!(stray, ["extras: in no layer (add it to LAYERS)"]);
}
