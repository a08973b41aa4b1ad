//! `cargo xtask tidy`: the style rules of STYLE §2.8 and §2.11 that rustfmt and clippy miss.
//!
//! The checks on one file are pure functions of its text, so they are unit-tested with small
//! strings; `run` only walks the tree, runs `cargo tree` and prints findings as `path:line`.
//! Function length is a ratchet: `xtask/tidy-long-functions.txt` lists the functions allowed
//! over the limit, and an entry that no longer exceeds it is itself a finding, so the list only
//! shrinks.

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use xshell::{Shell, cmd};

use crate::DynError;

const LINE_COLUMNS_MAX: usize = 100;
const FUNCTION_LINES_MAX: usize = 70;
/// The `//!` module doc must start within this many lines (room for `#![no_main]` and the like).
const MODULE_DOC_LINES_MAX: usize = 5;
const LONG_FUNCTIONS_ALLOWLIST: &str = "xtask/tidy-long-functions.txt";

/// Text forbidden anywhere, each with the reason printed next to it. The patterns are split
/// with `concat!` so that this file does not match itself.
const BANNED_TEXT: [(&str, &str); 7] = [
    (concat!("FIX", "ME"), "fix it now or open an issue"),
    (concat!("dbg", "!("), "debug output is not committed"),
    (concat!("todo", "!("), "unfinished code is not committed"),
    (
        concat!("map_err", "(|_|"),
        "keep the source error (STYLE §2.9)",
    ),
    (concat!(".field", " =="), FIELD_NAMES_ARE_FOR_LOGS),
    (concat!(".field", " !="), FIELD_NAMES_ARE_FOR_LOGS),
    (concat!(".field", " {"), FIELD_NAMES_ARE_FOR_LOGS),
];

const FIELD_NAMES_ARE_FOR_LOGS: &str =
    "decide on the error's typed `subject` or kind; a decode error's field name is for logs";

/// The shard's runtime edge: the only files of `crates/shard/src` that may name the runtime
/// (`compio`) or the channels between threads (`crossfire`). Everything else in the shard is
/// logic the simulator and the tests drive directly.
const SHARD_EDGE: [&str; 12] = [
    "crates/shard/src/check.rs",
    "crates/shard/src/clock.rs",
    "crates/shard/src/data/mod.rs",
    "crates/shard/src/disk.rs",
    "crates/shard/src/data/partition.rs",
    "crates/shard/src/data/signal.rs",
    "crates/shard/src/hashing.rs",
    "crates/shard/src/inbox.rs",
    "crates/shard/src/mail.rs",
    "crates/shard/src/node.rs",
    "crates/shard/src/server.rs",
    "crates/shard/src/server/",
];
const SHARD_RUNTIME_CRATES: [&str; 2] = ["compio", "crossfire"];
/// The one table from the shard's refusals to wire codes: the only file of the shard that
/// may name `ErrorCode` (handlers and planes return a typed `Refusal`).
const SHARD_CODE_TABLE: &str = "crates/shard/src/refusal.rs";
/// The module cycles of `crates/shard/src` allowed, each sorted: none.
const SHARD_CYCLES_ALLOWED: [&[&str]; 0] = [];

/// Crates that must never reach `proto`'s normal no-default-features graph: runtimes and OS
/// bindings, which would make the `no_std` crate depend on std.
const NO_STD_BANNED_CRATES: [&str; 4] = ["tokio", "compio", "libc", "mio"];
const NO_STD_CRATE: &str = "proto";

/// One rule broken at one place; `line` 0 means the whole file.
#[derive(Debug, PartialEq, Eq)]
struct Finding {
    path: String,
    line: usize,
    message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            0 => write!(f, "{}: {}", self.path, self.message),
            line => write!(f, "{}:{line}: {}", self.path, self.message),
        }
    }
}

#[derive(Debug)]
struct TidyError {
    findings: usize,
}

impl fmt::Display for TidyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tidy found {} problem(s)", self.findings)
    }
}

impl Error for TidyError {}

/// A function with a body: where it starts (1-based) and how many lines it spans.
#[derive(Debug, PartialEq, Eq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

pub(crate) fn run(sh: &Shell) -> Result<(), DynError> {
    let root = sh.current_dir();
    let files = source_files(&root)?;
    let sources = files
        .iter()
        .map(|path| read(&root, path).map(|text| (path.clone(), text)))
        .collect::<Result<Vec<_>, _>>()?;
    let test_files = test_module_files(&sources);

    let mut findings = Vec::new();
    let mut long_functions = Vec::new();
    for (path, text) in &sources {
        findings.extend(check_text(path, text));
        if is_test_file(path, &test_files) {
            continue;
        }
        if !has_module_doc(text) {
            let message = format!("no `//!` module doc in the first {MODULE_DOC_LINES_MAX} lines");
            findings.push(Finding {
                path: path.clone(),
                line: 1,
                message,
            });
        }
        findings.extend(check_shard_core(path, text));
        for function in functions(text) {
            if function.lines > FUNCTION_LINES_MAX {
                long_functions.push((path.clone(), function));
            }
        }
    }
    let allowlist = read(&root, LONG_FUNCTIONS_ALLOWLIST)?;
    findings.extend(ratchet(&allowlist, &long_functions));
    findings.extend(check_module_cycles(&sources, &test_files));
    findings.extend(check_features(&root)?);
    findings.extend(check_workspace_dependencies(&root)?);
    findings.extend(check_no_std(sh)?);

    for finding in &findings {
        println!("{finding}");
    }
    if findings.is_empty() {
        println!("tidy: {} files clean", sources.len());
        Ok(())
    } else {
        Err(TidyError {
            findings: findings.len(),
        }
        .into())
    }
}

#[derive(Debug)]
struct ReadError {
    path: PathBuf,
    source: std::io::Error,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "read {}", self.path.display())
    }
}

impl Error for ReadError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.source)
    }
}

fn read(root: &Path, path: &str) -> Result<String, ReadError> {
    let path = root.join(path);
    fs::read_to_string(&path).map_err(|source| ReadError { path, source })
}

fn read_dir(path: &Path) -> Result<Vec<PathBuf>, ReadError> {
    let error = |source| ReadError {
        path: path.to_path_buf(),
        source,
    };
    let mut entries = Vec::new();
    for entry in fs::read_dir(path).map_err(error)? {
        entries.push(entry.map_err(error)?.path());
    }
    entries.sort();
    Ok(entries)
}

/// Every `*.rs` file tidy covers, as `/`-separated paths relative to the root, sorted.
fn source_files(root: &Path) -> Result<Vec<String>, ReadError> {
    let mut dirs = vec![
        root.join("crates"),
        root.join("xtask"),
        root.join("bin"),
        root.join("fuzz/fuzz_targets"),
    ];
    let compat = root.join("compat");
    if compat.is_dir() {
        for project in read_dir(&compat)? {
            dirs.push(project.join("src"));
            dirs.push(project.join("tests"));
        }
    }
    let mut files = Vec::new();
    for dir in dirs.iter().filter(|dir| dir.is_dir()) {
        collect_rs_files(dir, &mut files)?;
    }
    let mut relative: Vec<String> = files
        .iter()
        .filter_map(|file| file.strip_prefix(root).ok())
        .map(|file| file.to_string_lossy().replace('\\', "/"))
        .collect();
    relative.sort();
    Ok(relative)
}

fn collect_rs_files(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), ReadError> {
    for path in read_dir(dir)? {
        let name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                collect_rs_files(&path, files)?;
            }
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
    Ok(())
}

/// Test code: `tests.rs`, `*_tests.rs`, anything under a `tests/` directory, and the files of
/// out-of-line `#[cfg(test)] mod name;` modules (`test_files`).
fn is_test_file(path: &str, test_files: &BTreeSet<String>) -> bool {
    let file_name = path.rsplit('/').next().unwrap_or(path);
    file_name == "tests.rs"
        || file_name.ends_with("_tests.rs")
        || path.split('/').any(|component| component == "tests")
        || test_files
            .iter()
            .any(|test| path == test || path.starts_with(&format!("{test}/")))
}

/// The paths (without `.rs`) of the modules declared as `#[cfg(test)] mod name;`: a file
/// `dir/name.rs` or a directory `dir/name/`.
fn test_module_files(sources: &[(String, String)]) -> BTreeSet<String> {
    let mut test_files = BTreeSet::new();
    for (path, text) in sources {
        let (dir, file_name) = path.rsplit_once('/').unwrap_or(("", path));
        let stem = file_name.trim_end_matches(".rs");
        let module_dir = match stem {
            "mod" | "lib" | "main" => dir.to_owned(),
            _ => format!("{dir}/{stem}"),
        };
        for name in out_of_line_test_modules(text) {
            test_files.insert(format!("{module_dir}/{name}.rs"));
            test_files.insert(format!("{module_dir}/{name}"));
        }
    }
    test_files
}

/// Line length and banned text, for every file including tests.
fn check_text(path: &str, text: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let finding = |message| Finding {
            path: path.to_owned(),
            line: index + 1,
            message,
        };
        let columns = line.chars().count();
        if columns > LINE_COLUMNS_MAX {
            findings.push(finding(format!(
                "{columns} columns, over {LINE_COLUMNS_MAX}"
            )));
        }
        for (pattern, reason) in BANNED_TEXT {
            if line.contains(pattern) {
                findings.push(finding(format!("`{pattern}`: {reason}")));
            }
        }
    }
    findings
}

fn has_module_doc(text: &str) -> bool {
    text.lines()
        .take(MODULE_DOC_LINES_MAX)
        .any(|line| line.trim_start().starts_with("//!"))
}

/// Compares the functions over the limit with the allowlist (`path::name` per line, `#`
/// comments): unlisted ones are findings, and so are listed ones that are no longer long.
fn ratchet(allowlist: &str, long_functions: &[(String, Function)]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let key = |path: &str, function: &Function| format!("{path}::{}", function.name);
    let mut allowed = BTreeSet::new();
    for (index, entry) in allowlist.lines().enumerate() {
        let entry = entry.trim();
        if entry.is_empty() || entry.starts_with('#') {
            continue;
        }
        allowed.insert(entry);
        if !long_functions
            .iter()
            .any(|(path, function)| key(path, function) == entry)
        {
            findings.push(Finding {
                path: LONG_FUNCTIONS_ALLOWLIST.to_owned(),
                line: index + 1,
                message: format!(
                    "`{entry}` is no longer over {FUNCTION_LINES_MAX} lines: remove the entry"
                ),
            });
        }
    }
    for (path, function) in long_functions {
        if !allowed.contains(key(path, function).as_str()) {
            findings.push(Finding {
                path: path.clone(),
                line: function.line,
                message: format!(
                    "fn `{}` is {} lines, over {FUNCTION_LINES_MAX}: split it",
                    function.name, function.lines
                ),
            });
        }
    }
    findings
}

/// Every feature of `bin/iggy/Cargo.toml` (but `default`) needs a row in `features.md`.
fn check_features(root: &Path) -> Result<Vec<Finding>, ReadError> {
    const MANIFEST: &str = "bin/iggy/Cargo.toml";
    if !root.join(MANIFEST).is_file() {
        return Ok(Vec::new());
    }
    let manifest = read(root, MANIFEST)?;
    let rows = if root.join("features.md").is_file() {
        feature_rows(&read(root, "features.md")?)
    } else {
        BTreeSet::new()
    };
    let findings = manifest_features(&manifest)
        .into_iter()
        .filter(|(_, feature)| feature != "default" && !rows.contains(feature))
        .map(|(line, feature)| Finding {
            path: MANIFEST.to_owned(),
            line,
            message: format!("feature `{feature}` has no row in features.md"),
        })
        .collect();
    Ok(findings)
}

/// The keys of a TOML table such as `[features]`: (1-based line, key, the whole line).
fn table_keys<'a>(manifest: &'a str, table: &str) -> Vec<(usize, &'a str, &'a str)> {
    let mut keys = Vec::new();
    let mut in_table = false;
    for (index, line) in manifest.lines().enumerate() {
        let line = line.trim();
        if line.starts_with('[') && line.ends_with(']') && !line.contains('"') {
            in_table = line == table;
            continue;
        }
        let Some((key, _)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        let is_key = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if in_table && is_key {
            keys.push((index + 1, key, line));
        }
    }
    keys
}

fn manifest_features(manifest: &str) -> Vec<(usize, String)> {
    table_keys(manifest, "[features]")
        .into_iter()
        .map(|(line, key, _)| (line, key.to_owned()))
        .collect()
}

/// Every `[workspace.dependencies]` entry must be inherited by a member, dev-dependencies
/// included (cargo-deny misses those under `exclude-dev`). Path entries are our own crates,
/// which may be declared before their first user.
fn check_workspace_dependencies(root: &Path) -> Result<Vec<Finding>, ReadError> {
    let manifest = read(root, "Cargo.toml")?;
    let mut member_dirs = Vec::new();
    for member in workspace_members(&manifest) {
        match member.strip_suffix("/*") {
            Some(dir) => member_dirs.extend(read_dir(&root.join(dir))?),
            None => member_dirs.push(root.join(member)),
        }
    }
    let mut members = Vec::new();
    for dir in member_dirs
        .iter()
        .filter(|dir| dir.join("Cargo.toml").is_file())
    {
        members.push(read(dir, "Cargo.toml")?);
    }
    Ok(unused_workspace_dependencies(&manifest, &members))
}

fn unused_workspace_dependencies(manifest: &str, members: &[String]) -> Vec<Finding> {
    let inherits = |member: &str, name: &str| {
        member.lines().map(str::trim).any(|line| {
            let Some(rest) = line.strip_prefix(name) else {
                return false;
            };
            let rest = rest.trim_start();
            rest.starts_with(".workspace")
                || (rest.starts_with('=') && rest.replace(' ', "").contains("workspace=true"))
        })
    };
    table_keys(manifest, "[workspace.dependencies]")
        .into_iter()
        .filter(|(_, _, line)| !line.replace(' ', "").contains("path="))
        .filter(|(_, name, _)| !members.iter().any(|member| inherits(member, name)))
        .map(|(line, name, _)| Finding {
            path: "Cargo.toml".to_owned(),
            line,
            message: format!("workspace dependency `{name}` is inherited by no member"),
        })
        .collect()
}

/// The entries of `members = [..]` in the root manifest, which may span lines.
fn workspace_members(manifest: &str) -> Vec<String> {
    let Some(start) = manifest.find("members") else {
        return Vec::new();
    };
    let list = &manifest[start..];
    let list = list
        .get(..list.find(']').unwrap_or(list.len()))
        .unwrap_or("");
    list.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The first cell of every table row in a markdown file, without backticks.
fn feature_rows(markdown: &str) -> BTreeSet<String> {
    markdown
        .lines()
        .filter_map(|line| line.trim().strip_prefix('|'))
        .filter_map(|row| row.split('|').next())
        .map(|cell| cell.trim().trim_matches('`').trim().to_owned())
        .filter(|cell| !cell.is_empty())
        .collect()
}

fn check_no_std(sh: &Shell) -> Result<Vec<Finding>, DynError> {
    let tree = cmd!(
        sh,
        "cargo tree -p {NO_STD_CRATE} -e normal --no-default-features --prefix none"
    )
    .read()?;
    let findings = banned_crates(&tree)
        .into_iter()
        .map(|name| Finding {
            path: format!("crates/{NO_STD_CRATE}/Cargo.toml"),
            line: 0,
            message: format!("no_std crate `{NO_STD_CRATE}` depends on banned crate `{name}`"),
        })
        .collect();
    Ok(findings)
}

/// The banned crate names in `cargo tree --prefix none` output (`name vX.Y.Z ...` per line).
fn banned_crates(tree: &str) -> BTreeSet<String> {
    tree.lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| NO_STD_BANNED_CRATES.contains(name))
        .map(str::to_owned)
        .collect()
}

/// The cycles among the shard's top-level modules (a module uses another when its code, tests
/// aside, names `crate::other`), beyond [`SHARD_CYCLES_ALLOWED`].
fn check_module_cycles(
    sources: &[(String, String)],
    test_files: &BTreeSet<String>,
) -> Vec<Finding> {
    const ROOT: &str = "crates/shard/src/";
    let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in sources {
        let Some(relative) = path.strip_prefix(ROOT) else {
            continue;
        };
        if is_test_file(path, test_files) {
            continue;
        }
        let module = relative
            .split(['/', '.'])
            .next()
            .unwrap_or_default()
            .to_owned();
        for (_, line) in code_outside_tests(&code_only(text)) {
            for used in line.split("crate::").skip(1) {
                let name: String = used
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != module {
                    uses.entry(module.clone()).or_default().insert(name);
                }
            }
        }
    }
    strongly_connected(&uses)
        .into_iter()
        .filter(|cycle| {
            !SHARD_CYCLES_ALLOWED
                .iter()
                .any(|allowed| allowed.iter().eq(cycle.iter()))
        })
        .map(|cycle| Finding {
            path: ROOT.to_owned(),
            line: 0,
            message: format!(
                "module cycle {}: break it (STYLE: no module cycles)",
                cycle.join(" ↔ ")
            ),
        })
        .collect()
}

/// The groups of two or more nodes of `graph` that reach each other, each sorted.
fn strongly_connected(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(node) = stack.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|node| (node, reach(node))).collect();
    let mut cycles: Vec<Vec<String>> = Vec::new();
    for (node, from_node) in &reached {
        let mut cycle: Vec<String> = from_node
            .iter()
            .filter(|other| reached.get(other).is_some_and(|back| back.contains(*node)))
            .cloned()
            .collect();
        if !cycle.contains(node) {
            continue;
        }
        cycle.sort();
        if cycle.len() > 1 && !cycles.contains(&cycle) {
            cycles.push(cycle);
        }
    }
    cycles
}

/// The lines of `code` (from [`code_only`]) with their 0-based index, but those inside items
/// marked `#[cfg(test)]`.
fn code_outside_tests(code: &[String]) -> Vec<(usize, &str)> {
    let test_items: Vec<(usize, usize)> = cfg_test_items(code)
        .into_iter()
        .map(|(start, end)| (start, end.line()))
        .collect();
    code.iter()
        .map(String::as_str)
        .enumerate()
        .filter(|(index, _)| {
            !test_items
                .iter()
                .any(|&(start, end)| (start..=end).contains(index))
        })
        .collect()
}

/// A file of the shard outside [`SHARD_EDGE`] that names the runtime or the channels in its
/// code, or one other than [`SHARD_CODE_TABLE`] that names wire codes (comments and
/// `#[cfg(test)]` items aside).
fn check_shard_core(path: &str, text: &str) -> Vec<Finding> {
    if !path.starts_with("crates/shard/src/") {
        return Vec::new();
    }
    let in_core = !SHARD_EDGE.iter().any(|edge| path.starts_with(edge));
    let mut findings = Vec::new();
    for (index, line) in code_outside_tests(&code_only(text)) {
        let names = |name: &str| {
            line.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|word| word == name)
        };
        let runtime = SHARD_RUNTIME_CRATES.iter().find(|name| names(name));
        let message = match runtime {
            Some(name) if in_core => format!(
                "`{name}` in the shard's core: only its runtime edge (SHARD_EDGE) may use it"
            ),
            _ if path != SHARD_CODE_TABLE && names("ErrorCode") => format!(
                "`ErrorCode` in the shard: return a `Refusal`; only {SHARD_CODE_TABLE} maps codes"
            ),
            _ => continue,
        };
        findings.push(Finding {
            path: path.to_owned(),
            line: index + 1,
            message,
        });
    }
    findings
}

/// The functions with a body, outside items marked `#[cfg(test)]`.
fn functions(text: &str) -> Vec<Function> {
    let code = code_only(text);
    let mut found = Vec::new();
    for (index, line) in code_outside_tests(&code) {
        for (column, name) in fn_names(line) {
            if let ItemEnd::Body(end) = item_end(&code, index, column) {
                found.push(Function {
                    name,
                    line: index + 1,
                    lines: end - index + 1,
                });
            }
        }
    }
    found
}

/// The names of out-of-line `#[cfg(test)] mod name;` declarations.
fn out_of_line_test_modules(text: &str) -> Vec<String> {
    let code = code_only(text);
    cfg_test_items(&code)
        .into_iter()
        .filter(|(_, end)| matches!(end, ItemEnd::Semicolon(_)))
        .filter_map(|(start, end)| {
            let item = code.get(start..=end.line())?.join(" ");
            let mut words = item.split(|c: char| !(c.is_alphanumeric() || c == '_'));
            words.find(|word| *word == "mod")?;
            words.find(|word| !word.is_empty()).map(str::to_owned)
        })
        .collect()
}

/// Where an item that starts at a line ends, by 0-based line index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ItemEnd {
    /// The closing brace of its body.
    Body(usize),
    /// A `;` before any body: a declaration such as `fn f();` or `mod m;`.
    Semicolon(usize),
    /// The text ended first.
    Unterminated,
}

impl ItemEnd {
    fn line(self) -> usize {
        match self {
            ItemEnd::Body(line) | ItemEnd::Semicolon(line) => line,
            ItemEnd::Unterminated => usize::MAX,
        }
    }
}

/// The items under `#[cfg(test)]` attributes: (attribute line, item end).
fn cfg_test_items(code: &[String]) -> Vec<(usize, ItemEnd)> {
    const ATTRIBUTE: &str = "#[cfg(test)]";
    let mut items = Vec::new();
    for (index, line) in code.iter().enumerate() {
        if let Some(column) = line.find(ATTRIBUTE) {
            let end = item_end(code, index, column + ATTRIBUTE.len());
            items.push((index, end));
        }
    }
    items
}

/// Scans from `line`/`column` to the item's end: the brace that closes its first `{`, or a
/// `;` met outside parentheses and brackets before any `{`.
fn item_end(code: &[String], line: usize, column: usize) -> ItemEnd {
    let mut nesting = 0usize;
    let mut braces = 0usize;
    for (index, text) in code.iter().enumerate().skip(line) {
        let start = if index == line { column } else { 0 };
        for c in text.get(start..).unwrap_or("").chars() {
            match c {
                '(' | '[' => nesting += 1,
                ')' | ']' => nesting = nesting.saturating_sub(1),
                '{' => braces += 1,
                '}' if braces == 1 => return ItemEnd::Body(index),
                '}' => braces = braces.saturating_sub(1),
                ';' if braces == 0 && nesting == 0 => return ItemEnd::Semicolon(index),
                _ => {}
            }
        }
    }
    ItemEnd::Unterminated
}

/// Each `fn name` in a line of code: the byte column of `fn` and the name.
fn fn_names(line: &str) -> Vec<(usize, String)> {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut names = Vec::new();
    for (column, _) in line.match_indices("fn") {
        let before = line.get(..column).and_then(|text| text.chars().next_back());
        let after = line.get(column + 2..).unwrap_or("");
        if before.is_some_and(is_ident) || !after.starts_with(char::is_whitespace) {
            continue;
        }
        let name: String = after
            .trim_start()
            .chars()
            .take_while(|&c| is_ident(c))
            .collect();
        if !name.is_empty() {
            names.push((column, name));
        }
    }
    names
}

/// The text, line for line, with comments and the insides of string and char literals blanked
/// to spaces, so braces and keywords in them do not count. Lifetimes are kept.
fn code_only(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut index = 0;
    while let Some(&c) = chars.get(index) {
        let next = chars.get(index + 1).copied();
        let previous = index.checked_sub(1).and_then(|i| chars.get(i)).copied();
        let literal_start = !previous.is_some_and(|p| p.is_alphanumeric() || p == '_');
        let end = match (c, next) {
            ('/', Some('/')) => Some(find(&chars, index, |i| chars.get(i) == Some(&'\n'))),
            ('/', Some('*')) => Some(block_comment_end(&chars, index)),
            ('"', _) => Some(string_end(&chars, index)),
            ('r' | 'b', _) if literal_start => raw_string_end(&chars, index),
            ('\'', _) => char_literal_end(&chars, index),
            _ => None,
        };
        if let Some(end) = end {
            let end = end.min(chars.len());
            out.extend(
                chars[index..end]
                    .iter()
                    .map(|&c| if c == '\n' { c } else { ' ' }),
            );
            index = end;
        } else {
            out.push(c);
            index += 1;
        }
    }
    out.lines().map(str::to_owned).collect()
}

/// The first index at or after `start` where `at_end` holds, or the text's length.
fn find(chars: &[char], start: usize, at_end: impl Fn(usize) -> bool) -> usize {
    (start..chars.len())
        .find(|&i| at_end(i))
        .unwrap_or(chars.len())
}

fn block_comment_end(chars: &[char], start: usize) -> usize {
    let mut depth = 0usize;
    let mut index = start;
    while index + 1 < chars.len() {
        match (chars[index], chars[index + 1]) {
            ('/', '*') => {
                depth += 1;
                index += 2;
            }
            ('*', '/') => {
                depth -= 1;
                index += 2;
                if depth == 0 {
                    return index;
                }
            }
            _ => index += 1,
        }
    }
    chars.len()
}

/// The index after the closing quote of a `"` string starting at `start`.
fn string_end(chars: &[char], start: usize) -> usize {
    let mut index = start + 1;
    while let Some(&c) = chars.get(index) {
        match c {
            '\\' => index += 2,
            '"' => return index + 1,
            _ => index += 1,
        }
    }
    chars.len()
}

/// Raw strings (`r"…"`, `r#"…"#`, `br"…"`); `None` when `start` begins an identifier instead.
fn raw_string_end(chars: &[char], start: usize) -> Option<usize> {
    let mut index = start;
    if chars.get(index) == Some(&'b') {
        index += 1;
    }
    if chars.get(index) != Some(&'r') {
        return None;
    }
    index += 1;
    let hashes = chars[index..].iter().take_while(|&&c| c == '#').count();
    index += hashes;
    if chars.get(index) != Some(&'"') {
        return None;
    }
    let closes = |i: usize| {
        chars.get(i) == Some(&'"') && (1..=hashes).all(|h| chars.get(i + h) == Some(&'#'))
    };
    let close = find(chars, index + 1, closes);
    Some(close + 1 + hashes)
}

/// Char literals (`'{'`, `'\n'`, `'\u{7b}'`); `None` for a lifetime or label.
fn char_literal_end(chars: &[char], start: usize) -> Option<usize> {
    match chars.get(start + 1) {
        Some('\\') => {
            let close = (start + 3..chars.len().min(start + 12)).find(|&i| chars[i] == '\'')?;
            Some(close + 1)
        }
        Some(_) if chars.get(start + 2) == Some(&'\'') => Some(start + 3),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::fmt::Write as _;

    use super::{
        Function, SHARD_CODE_TABLE, banned_crates, check_module_cycles, check_shard_core,
        check_text, code_only, feature_rows, functions, has_module_doc, is_test_file,
        manifest_features, out_of_line_test_modules, ratchet, unused_workspace_dependencies,
        workspace_members,
    };

    fn function_of(body_lines: usize) -> String {
        let mut text = String::from("pub fn long(x: [u8; 4]) -> u8 {\n");
        for i in 0..body_lines {
            writeln!(text, "    let _v{i} = x[0];").unwrap();
        }
        text.push_str("    0\n}\n");
        text
    }

    #[test]
    fn module_cycles_of_the_shard_are_found() {
        let file = |path: &str, text: &str| (format!("crates/shard/src/{path}"), text.to_owned());
        let sources = [
            file("a.rs", "//! A.\nuse crate::b::X;\n"),
            file("b/mod.rs", "//! B.\nfn f() { crate::c::g(); }\n"),
            file(
                "c.rs",
                "//! C uses crate::a in a comment only.\nuse crate::a::Y;\n",
            ),
            file(
                "d.rs",
                "//! D.\n#[cfg(test)]\nmod tests {\n    use crate::a::Z;\n}\n",
            ),
            file("server.rs", "//! S.\nuse crate::handler::H;\n"),
            file(
                "handler.rs",
                "//! H.\nuse crate::server::S;\nuse crate::d::D;\n",
            ),
        ];
        let findings = check_module_cycles(&sources, &BTreeSet::new());
        let messages: Vec<String> = findings.iter().map(|f| f.message.clone()).collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(messages[0].contains("a ↔ b ↔ c"), "{messages:?}");
        assert!(messages[1].contains("handler ↔ server"), "{messages:?}");
    }

    #[test]
    fn the_shard_core_names_no_runtime() {
        let text = concat!(
            "//! Uses compio in a comment only.\n",
            "use crossfire::mpsc;\n",
            "fn f() { let s = \"compio\"; compio::runtime::spawn(g()); }\n",
            "#[cfg(test)]\nmod tests {\n    use compio::runtime::Runtime;\n}\n",
        );
        let lines = |path| -> Vec<usize> {
            check_shard_core(path, text)
                .iter()
                .map(|f| f.line)
                .collect()
        };
        assert_eq!(lines("crates/shard/src/data/groups.rs"), [2, 3]);
        assert!(
            lines("crates/shard/src/server/inbound.rs").is_empty(),
            "the edge may"
        );
        assert!(
            lines("crates/sim/src/world.rs").is_empty(),
            "other crates may"
        );
    }

    #[test]
    fn only_the_code_table_names_wire_codes() {
        let text = concat!(
            "//! Names ErrorCode in a comment only.\n",
            "use proto::ErrorCode;\n",
            "fn f() -> Refusal { Refusal::Malformed }\n",
            "#[cfg(test)]\nmod tests {\n    use proto::ErrorCode;\n}\n",
        );
        let lines = |path| -> Vec<usize> {
            check_shard_core(path, text)
                .iter()
                .map(|f| f.line)
                .collect()
        };
        assert_eq!(lines("crates/shard/src/handler/streams.rs"), [2]);
        assert_eq!(lines("crates/shard/src/server.rs"), [2], "the edge neither");
        assert!(lines(SHARD_CODE_TABLE).is_empty());
        assert!(lines("bin/iggy/src/main.rs").is_empty(), "other crates may");
    }

    #[test]
    fn line_length() {
        let ok = "x".repeat(100);
        let long = "é".repeat(101);
        let findings = check_text("a.rs", &format!("{ok}\n{long}\n"));
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].line, 2);
        assert_eq!(findings[0].to_string(), "a.rs:2: 101 columns, over 100");
    }

    #[test]
    fn banned_text() {
        let text = concat!("// FIX", "ME later\nlet a = b.map_err", "(|_| E)?;\nfine\n");
        let lines: Vec<usize> = check_text("a.rs", text).iter().map(|f| f.line).collect();
        assert_eq!(lines, [1, 2]);
        let text = concat!("dbg", "!(x);\ntodo", "!()\n");
        assert_eq!(check_text("a.rs", text).len(), 2);
    }

    #[test]
    fn module_doc() {
        assert!(has_module_doc("//! Owns the frames.\nuse x;\n"));
        assert!(has_module_doc("#![no_main]\n\n//! Fuzzes decode.\n"));
        assert!(!has_module_doc("use x;\n\n\n\n\n//! too late\n"));
        assert!(!has_module_doc("/// item doc\nfn f() {}\n"));
    }

    #[test]
    fn function_length_counts_fn_line_to_closing_brace() {
        // The fn line, the body lines, `0` and the closing brace.
        let found = functions(&function_of(67));
        assert_eq!(
            found,
            [Function {
                name: "long".into(),
                line: 1,
                lines: 70
            }]
        );
        assert_eq!(functions(&function_of(68))[0].lines, 71);
    }

    #[test]
    fn function_length_ignores_braces_in_literals_and_comments() {
        let text = "fn f<'a>(s: &'a str) -> char {\n    let _ = \"}}\";\n    // }\n    \
                    let _ = r#\"\"}\"#;\n    /* } */ '}'\n}\nfn g() {}\n";
        let found = functions(text);
        assert_eq!(found.len(), 2);
        assert_eq!((found[0].name.as_str(), found[0].lines), ("f", 6));
        assert_eq!(
            (found[1].name.as_str(), found[1].line, found[1].lines),
            ("g", 7, 1)
        );
        assert_eq!(code_only("'\\u{7b}' \"{\"")[0].trim(), "");
    }

    #[test]
    fn function_length_skips_declarations_pointers_and_test_items() {
        let text = "trait T {\n    fn decl(&self) -> [u8; 2];\n}\ntype P = fn(u8);\n\
                    #[cfg(test)]\nmod tests {\n    fn helper() {\n    }\n}\n\
                    #[cfg(test)]\nfn strategy() {}\nfn after() {\n}\n";
        let found = functions(text);
        assert_eq!(
            found,
            [Function {
                name: "after".into(),
                line: 12,
                lines: 2
            }]
        );
    }

    #[test]
    fn test_files() {
        let modules = out_of_line_test_modules("#[cfg(test)]\nmod proptests;\nmod real;\n");
        assert_eq!(modules, ["proptests"]);
        let test_files: BTreeSet<String> = ["c/src/a/proptests".to_owned()].into();
        assert!(is_test_file("c/src/error/tests.rs", &test_files));
        assert!(is_test_file("c/src/codec_tests.rs", &test_files));
        assert!(is_test_file("compat/v0/tests/golden.rs", &test_files));
        assert!(is_test_file("c/src/a/proptests/mod.rs", &test_files));
        assert!(!is_test_file("c/src/a/proptests_more.rs", &test_files));
        assert!(!is_test_file("c/src/contests.rs", &test_files));
    }

    #[test]
    fn ratchet_only_shrinks() {
        let long = |name: &str| Function {
            name: name.into(),
            line: 3,
            lines: 90,
        };
        let found = [
            ("a.rs".to_owned(), long("old")),
            ("a.rs".to_owned(), long("new")),
        ];
        let findings = ratchet("# comment\na.rs::old\na.rs::gone\n", &found);
        let messages: Vec<String> = findings.iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 2);
        assert!(messages[0].starts_with("xtask/tidy-long-functions.txt:3: `a.rs::gone`"));
        assert!(messages[1].starts_with("a.rs:3: fn `new` is 90 lines"));
    }

    #[test]
    fn features_table() {
        let manifest = "[package]\nname = \"iggy\"\n[features]\ndefault = [\"tcp\"]\n\
                        tcp = [\"transport/tcp\"]\nfull = [\n    \"tcp\",\n]\n\
                        [dependencies]\nx = 1\n";
        let features: Vec<String> = manifest_features(manifest)
            .into_iter()
            .map(|f| f.1)
            .collect();
        assert_eq!(features, ["default", "tcp", "full"]);
        let rows = feature_rows("| feature | enables |\n| --- | --- |\n| `tcp` | TCP |\n");
        assert!(rows.contains("tcp") && rows.contains("feature") && !rows.contains("full"));
    }

    #[test]
    fn no_std_ban_list() {
        let tree = "proto v0.1.0 (/w/crates/proto)\nthiserror v2.0.17\nlibc v0.2.1\nlibc v0.2.1\n";
        assert_eq!(banned_crates(tree), ["libc".to_owned()].into());
    }

    #[test]
    fn workspace_dependencies() {
        let root = "[workspace]\nmembers = [\n    \"crates/a\",\n    \"xtask\",\n]\n\
                    [workspace.dependencies]\nown = { path = \"crates/own\" }\n\
                    used = \"1\"\ndev = \"1\"\nunused = { version = \"1\" }\n";
        assert_eq!(workspace_members(root), ["crates/a", "xtask"]);
        let members = [
            "[dependencies]\nused.workspace = true\n".to_owned(),
            "[dev-dependencies]\ndev = { workspace = true, features = [\"x\"] }\n".to_owned(),
        ];
        let findings = unused_workspace_dependencies(root, &members);
        let messages: Vec<String> = findings.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            ["Cargo.toml:10: workspace dependency `unused` is inherited by no member"]
        );
    }
}
