//! `cargo xtask ci`: the single test command, run by `.ci/run` and by hand.
//!
//! Steps run in `Step::ALL` order, each under a header and with its timing, and the first
//! failure stops the run with a non-zero exit. Steps whose project does not exist yet
//! (`compat/*`, `fuzz/`) report that and pass.

use std::error::Error;
use std::fmt;
use std::path::PathBuf;
use std::time::Instant;

use xshell::{Shell, cmd};

use crate::flags::Step;
use crate::{DynError, tidy};

/// Installed when `cargo deny` is missing; pinned so that a new release cannot change what
/// `deny.toml` means under CI's feet.
const CARGO_DENY_VERSION: &str = "0.20.2";
/// The `iggy` CLI users already have (spec/CLIENTS.md); the integration step drives it.
const IGGY_CLI_VERSION: &str = "0.14.1-edge.7";
/// Debian packages the server links against: hwloc for core pinning (`bin/iggy/src/cores.rs`).
/// `hwlocality-sys` asks `pkg-config --static` for the link flags, which name libudev too.
const DEBIAN_PACKAGES: [&str; 3] = ["pkg-config", "libhwloc-dev", "libudev-dev"];
/// The browser the web UI's end-to-end test drives, and its `WebDriver` server.
const BROWSER_PACKAGES: [&str; 2] = ["chromium", "chromium-driver"];
/// Where Debian puts them (the test's defaults; `CHROMIUM`, `CHROMEDRIVER` override).
const BROWSER_PROGRAMS: [&str; 2] = ["/usr/bin/chromium", "/usr/bin/chromedriver"];

#[derive(Debug)]
struct StepError {
    step: Step,
    source: DynError,
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ci step `{}` failed", self.step.name())
    }
}

impl Error for StepError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(self.source.as_ref())
    }
}

pub(crate) fn run(sh: &Shell, skip: &[Step]) -> Result<(), DynError> {
    let run_start = Instant::now();
    let steps: Vec<Step> = Step::ALL
        .into_iter()
        .filter(|step| !skip.contains(step))
        .collect();
    for (index, &step) in steps.iter().enumerate() {
        println!("\n==> [{}/{}] {}", index + 1, steps.len(), step.name());
        let step_start = Instant::now();
        let result = run_step(sh, step);
        let seconds = step_start.elapsed().as_secs_f64();
        match result {
            Ok(()) => println!("<== {} ok in {seconds:.1}s", step.name()),
            Err(source) => {
                println!("<== {} FAILED after {seconds:.1}s", step.name());
                return Err(StepError { step, source }.into());
            }
        }
    }
    let skipped: Vec<&str> = skip.iter().map(|step| step.name()).collect();
    if !skipped.is_empty() {
        println!("\nskipped: {}", skipped.join(", "));
    }
    println!("\nci ok in {:.1}s", run_start.elapsed().as_secs_f64());
    Ok(())
}

fn run_step(sh: &Shell, step: Step) -> Result<(), DynError> {
    match step {
        Step::Install => install(sh)?,
        Step::Fmt => cmd!(sh, "cargo fmt --all -- --check").run()?,
        Step::Clippy => cmd!(sh, "cargo clippy --workspace --all-targets -- -D warnings").run()?,
        Step::Tidy => tidy::run(sh)?,
        Step::Test => test(sh)?,
        Step::NoStd => {
            cmd!(sh, "cargo check -p proto --no-default-features").run()?;
            cmd!(sh, "cargo check -p vsr").run()?;
        }
        Step::Deny => cmd!(sh, "cargo deny check licenses bans sources").run()?,
        Step::Vopr => crate::vopr::ci(sh)?,
        Step::Compat => compat(sh)?,
        Step::Features => crate::dist::check_features(sh)?,
        Step::Dist => {
            crate::dist::run(sh, crate::flags::Variant::All)?;
        }
        Step::Integration => integration(sh)?,
        Step::Fuzz => fuzz(sh)?,
    }
    Ok(())
}

/// Whether `cargo <subcommand> --version` runs, i.e. the subcommand is installed.
fn has_cargo_subcommand(sh: &Shell, subcommand: &str) -> bool {
    cmd!(sh, "cargo {subcommand} --version")
        .quiet()
        .ignore_stdout()
        .ignore_stderr()
        .run()
        .is_ok()
}

fn install(sh: &Shell) -> Result<(), DynError> {
    install_hwloc(sh)?;
    install_browser(sh)?;
    if has_cargo_subcommand(sh, "deny") {
        let version = cmd!(sh, "cargo deny --version").read()?;
        println!("{version}: already installed");
    } else {
        cmd!(
            sh,
            "cargo install cargo-deny --locked --version {CARGO_DENY_VERSION}"
        )
        .run()?;
    }
    install_iggy_cli(sh)
}

/// Installs `DEBIAN_PACKAGES` with apt-get when pkg-config cannot find hwloc and libudev,
/// through `sudo` unless already root.
fn install_hwloc(sh: &Shell) -> Result<(), DynError> {
    let found = cmd!(sh, "pkg-config --exists hwloc libudev")
        .quiet()
        .ignore_stderr()
        .run()
        .is_ok();
    if found {
        let version = cmd!(sh, "pkg-config --modversion hwloc").read()?;
        println!("hwloc {version}: already installed");
        return Ok(());
    }
    apt_install(sh, &DEBIAN_PACKAGES, "hwloc not found by pkg-config")
}

/// Installs Debian's Chromium and `chromedriver` for the web UI's browser test
/// (`compat/sdk-*/tests/web_ui.rs`) when either is missing.
fn install_browser(sh: &Shell) -> Result<(), DynError> {
    let found = BROWSER_PROGRAMS
        .iter()
        .all(|program| std::path::Path::new(program).is_file());
    if found {
        println!("chromium and chromedriver: already installed");
        return Ok(());
    }
    apt_install(sh, &BROWSER_PACKAGES, "chromium or chromedriver missing")
}

/// `apt-get install` of `packages`, through `sudo` unless already root; `why` says what
/// was missing when apt-get is not there.
fn apt_install(sh: &Shell, packages: &[&str], why: &str) -> Result<(), DynError> {
    let has_apt = cmd!(sh, "apt-get --version")
        .quiet()
        .ignore_stdout()
        .ignore_stderr()
        .run()
        .is_ok();
    if !has_apt {
        let packages = packages.join(" ");
        return Err(format!("{why}: install {packages} or their equivalents").into());
    }
    // `sudo` goes first when not root; xshell cannot splat the program name itself.
    let (program, apt_get): (&str, &[&str]) = if cmd!(sh, "id -u").read()? == "0" {
        ("apt-get", &[])
    } else {
        ("sudo", &["apt-get"])
    };
    cmd!(sh, "{program} {apt_get...} update").run()?;
    cmd!(
        sh,
        "{program} {apt_get...} install -y --no-install-recommends {packages...}"
    )
    .run()?;
    Ok(())
}

/// The CLI's binary is called `iggy`, like our server, so it is looked up where
/// `cargo install` puts it rather than on `PATH`.
fn install_iggy_cli(sh: &Shell) -> Result<(), DynError> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let cli = home.join("bin/iggy");
    let installed = cmd!(sh, "{cli} --version")
        .quiet()
        .ignore_stderr()
        .read()
        .unwrap_or_default();
    if installed.contains(IGGY_CLI_VERSION) {
        println!("iggy-cli {IGGY_CLI_VERSION}: already installed");
        return Ok(());
    }
    cmd!(
        sh,
        "cargo install iggy-cli --locked --version {IGGY_CLI_VERSION}"
    )
    .run()?;
    Ok(())
}

/// nextest where installed, `cargo test` elsewhere; doctests always, as nextest skips them.
fn test(sh: &Shell) -> Result<(), DynError> {
    if has_cargo_subcommand(sh, "nextest") {
        cmd!(sh, "cargo nextest run --workspace").run()?;
    } else {
        cmd!(sh, "cargo test --workspace").run()?;
    }
    cmd!(sh, "cargo test --workspace --doc").run()?;
    Ok(())
}

/// The `compat/<prefix>*` projects, each with its own lockfile, sorted.
fn compat_projects(sh: &Shell, prefix: &str) -> Result<Vec<PathBuf>, DynError> {
    let compat = sh.current_dir().join("compat");
    let mut manifests: Vec<PathBuf> = Vec::new();
    if compat.is_dir() {
        for entry in std::fs::read_dir(&compat)? {
            let path = entry?.path();
            let named = path
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or_default();
            let manifest = path.join("Cargo.toml");
            if named.starts_with(prefix) && manifest.is_file() {
                manifests.push(manifest);
            }
        }
    }
    manifests.sort();
    Ok(manifests)
}

/// The codec cross-checks (`compat/codec-*`) against the published SDK crates. They share
/// one target directory so their common dependencies build once.
fn compat(sh: &Shell) -> Result<(), DynError> {
    let manifests = compat_projects(sh, "codec-")?;
    if manifests.is_empty() {
        println!("no compat/codec-*/Cargo.toml: nothing to test");
    }
    let target_dir = sh.current_dir().join("target/compat");
    for manifest in &manifests {
        cmd!(sh, "cargo test --manifest-path {manifest}")
            .env("CARGO_TARGET_DIR", &target_dir)
            .run()?;
    }
    Ok(())
}

/// The real clients against the real binary, the full one unpacked from the release archive
/// (`dist`, made when missing): the Rust SDK projects (`compat/sdk-*`, whose tests cover every
/// transport), the Python SDK and the CLI. Each test starts its own server on free loopback
/// ports.
fn integration(sh: &Shell) -> Result<(), DynError> {
    let root = sh.current_dir();
    if !root.join("bin/iggy/Cargo.toml").is_file() {
        println!("no bin/iggy: nothing to run against");
        return Ok(());
    }
    if !root.join("target/dist/SHA256SUMS").is_file() {
        crate::dist::run(sh, crate::flags::Variant::All)?;
    }
    let binaries = crate::dist::verify_and_unpack(sh, &["full", "minimal"])?;
    let (server, minimal) = (&binaries[0], &binaries[1]);
    minimal_refuses_what_it_lacks(minimal)?;
    let target_dir = root.join("target/compat");
    minimal_serves_tcp(sh, &target_dir, minimal)?;
    for manifest in compat_projects(sh, "sdk-")? {
        cmd!(
            sh,
            "cargo test --manifest-path {manifest} --no-fail-fast -- --test-threads=2"
        )
        .env("CARGO_TARGET_DIR", &target_dir)
        .env("IGGY_SERVER_BIN", server)
        .run()?;
    }
    let python = root.join("compat/python/run.sh");
    if python.is_file() {
        cmd!(sh, "bash {python}")
            .env("IGGY_SERVER_BIN", server)
            .run()?;
    }
    let cli = root.join("compat/cli/smoke.sh");
    if cli.is_file() {
        cmd!(sh, "bash {cli}")
            .env("IGGY_SERVER_BIN", server)
            .run()?;
    }
    Ok(())
}

/// The SDK project that [`minimal_serves_tcp`] runs, and the flows it runs there.
const MINIMAL_SDK: &str = "compat/sdk-0.11.1-edge.9/Cargo.toml";
const MINIMAL_FLOWS: [&str; 4] = ["messages", "streams_topics", "groups", "users"];

/// The minimal binary (built for size, `[profile.edge]`) serves the real SDK's send, poll,
/// offset, group and metadata flows over TCP, as the full one does.
fn minimal_serves_tcp(
    sh: &Shell,
    target_dir: &std::path::Path,
    binary: &std::path::Path,
) -> Result<(), DynError> {
    let manifest = sh.current_dir().join(MINIMAL_SDK);
    let mut flows = Vec::new();
    for flow in MINIMAL_FLOWS {
        flows.extend(["--test", flow]);
    }
    cmd!(
        sh,
        "cargo test --manifest-path {manifest} {flows...} -- --test-threads=2"
    )
    .env("CARGO_TARGET_DIR", target_dir)
    .env("IGGY_SERVER_BIN", binary)
    .run()?;
    Ok(())
}

/// The minimal binary, asked for a transport it was built without, stops at start with a
/// message naming the feature, for each such transport.
fn minimal_refuses_what_it_lacks(binary: &std::path::Path) -> Result<(), DynError> {
    let data = std::env::temp_dir().join(format!("iggy-minimal-{}", std::process::id()));
    for (variable, feature) in [
        ("IGGY_HTTP_ENABLED", "http"),
        ("IGGY_WEBSOCKET_ENABLED", "ws"),
        ("IGGY_QUIC_ENABLED", "quic"),
        ("IGGY_TCP_TLS_ENABLED", "tls"),
        ("IGGY_SYSTEM_IO_BACKEND", "io-uring"),
        ("IGGY_HTTP_WEB_UI", "web"),
    ] {
        let value = if feature == "io-uring" {
            "io_uring"
        } else {
            "true"
        };
        let output = std::process::Command::new(binary)
            .env("IGGY_SYSTEM_PATH", &data)
            .env("IGGY_TCP_ADDRESS", "127.0.0.1:0")
            .env(variable, value)
            .arg("--with-default-root-credentials")
            .stdin(std::process::Stdio::null())
            .output()?;
        let text = String::from_utf8_lossy(&output.stderr).into_owned()
            + &String::from_utf8_lossy(&output.stdout);
        let named = text.contains(&format!("feature `{feature}`"));
        if output.status.success() || !named {
            return Err(format!(
                "the minimal binary with {variable}={value} should stop naming feature \
                 `{feature}`; it said: {text}"
            )
            .into());
        }
        println!("minimal binary, {variable}={value}: refused, naming `{feature}`");
    }
    let _ = std::fs::remove_dir_all(&data);
    Ok(())
}

/// Type-checks the fuzz targets the way cargo-fuzz builds them (`--cfg fuzzing`), in their own
/// target directory so the flag does not invalidate the workspace's build cache.
fn fuzz(sh: &Shell) -> Result<(), DynError> {
    let root = sh.current_dir();
    let manifest = root.join("fuzz/Cargo.toml");
    if !manifest.is_file() {
        println!("no fuzz/Cargo.toml: nothing to check");
        return Ok(());
    }
    cmd!(sh, "cargo check --manifest-path {manifest}")
        .env("CARGO_TARGET_DIR", root.join("target/fuzz"))
        .env("RUSTFLAGS", "--cfg fuzzing")
        .run()?;
    Ok(())
}
