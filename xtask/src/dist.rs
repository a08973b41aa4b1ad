//! Release artifacts: `cargo xtask dist` builds the server per variant (`--locked`; full with
//! the release profile, minimal with the size-optimised `edge` profile), strips it, and packs
//! it with README.md, LICENSE and the default config.toml into
//! `target/dist/iggy-<version>-<variant>-<host triple>.tar.gz`, with a `SHA256SUMS` beside
//! them; `cargo xtask check-features` builds bin/iggy with each feature alone (a transport
//! alone; any other feature with `minimal`, since the server needs a transport: `tls` alone
//! would be TCP with TLS and nothing else to check), `minimal` and `full`. Both shell out to
//! `strip`, `tar` and `sha256sum` (binutils and coreutils).

use std::path::{Path, PathBuf};

use xshell::{Shell, cmd};

use crate::DynError;
use crate::flags::Variant;

/// Every feature of bin/iggy that `check-features` builds, with what it needs beside it.
const FEATURES: [&str; 12] = [
    "tcp",
    "quic",
    "ws",
    "http",
    "web",
    "minimal,tls",
    "minimal,io-uring",
    "minimal,bench",
    "minimal,vsr",
    "minimal,encryption",
    "minimal",
    "full",
];

/// One release archive: its variant name, the cargo feature flags that build it and the
/// profile it is built with (the binary lands in `target/<profile>/`).
struct Build {
    name: &'static str,
    features: &'static [&'static str],
    profile: &'static str,
}

/// The edge build: `[profile.edge]` in the workspace's Cargo.toml, made for size.
const MINIMAL: Build = Build {
    name: "minimal",
    features: &["--no-default-features", "--features", "minimal"],
    profile: "edge",
};
const FULL: Build = Build {
    name: "full",
    features: &["--features", "full"],
    profile: "release",
};

/// Makes the archives of `variant` under `target/dist`; returns the unpacked directory of
/// each, by variant name.
pub(crate) fn run(sh: &Shell, variant: Variant) -> Result<Vec<(String, PathBuf)>, DynError> {
    let root = sh.current_dir();
    let dist = root.join("target/dist");
    if dist.exists() {
        std::fs::remove_dir_all(&dist)?;
    }
    std::fs::create_dir_all(&dist)?;
    let version = package_version(&root.join("bin/iggy/Cargo.toml"))?;
    let host = host_triple(sh)?;
    let builds: &[Build] = match variant {
        Variant::Minimal => &[MINIMAL],
        Variant::Full => &[FULL],
        Variant::All => &[MINIMAL, FULL],
    };
    let mut made = Vec::new();
    let mut archives = Vec::new();
    for build in builds {
        let (features, profile) = (build.features, build.profile);
        cmd!(
            sh,
            "cargo build --profile {profile} --locked --bin iggy {features...}"
        )
        .run()?;
        let name = format!("iggy-{version}-{}-{host}", build.name);
        let staging = dist.join(&name);
        std::fs::create_dir_all(&staging)?;
        let binary = staging.join("iggy");
        std::fs::copy(root.join("target").join(profile).join("iggy"), &binary)?;
        cmd!(sh, "strip {binary}").run()?;
        for (from, to) in [
            ("README.md", "README.md"),
            ("LICENSE", "LICENSE"),
            ("bin/iggy/config.toml", "config.toml"),
        ] {
            std::fs::copy(root.join(from), staging.join(to))?;
        }
        let archive = format!("{name}.tar.gz");
        cmd!(sh, "tar -C {dist} -czf {dist}/{archive} {name}").run()?;
        let size = std::fs::metadata(&binary)?.len();
        // Hundredths of a MiB, in integers (no float casts).
        let centi_mib = size * 100 / (1 << 20);
        println!(
            "{}: {archive}, binary {size} bytes ({}.{:02} MiB stripped)",
            build.name,
            centi_mib / 100,
            centi_mib % 100
        );
        archives.push(archive);
        made.push((build.name.to_owned(), staging));
    }
    let sums = {
        let _in_dist = sh.push_dir(&dist);
        cmd!(sh, "sha256sum {archives...}").read()?
    };
    std::fs::write(dist.join("SHA256SUMS"), format!("{sums}\n"))?;
    println!("{}", dist.join("SHA256SUMS").display());
    Ok(made)
}

/// Checks `target/dist/SHA256SUMS` against the archives and unpacks each into
/// `target/dist/unpacked` once; returns the unpacked binary of each of `variants`, in order.
pub(crate) fn verify_and_unpack(sh: &Shell, variants: &[&str]) -> Result<Vec<PathBuf>, DynError> {
    let dist = sh.current_dir().join("target/dist");
    let unpacked = dist.join("unpacked");
    std::fs::create_dir_all(&unpacked)?;
    let _in_dist = sh.push_dir(&dist);
    cmd!(sh, "sha256sum --check --strict SHA256SUMS").run()?;
    let mut stems = Vec::new();
    for entry in std::fs::read_dir(&dist)? {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|name| name.to_str()) else {
            continue;
        };
        if let Some(stem) = name.strip_suffix(".tar.gz") {
            cmd!(sh, "tar -C {unpacked} -xzf {path}").run()?;
            stems.push(stem.to_owned());
        }
    }
    variants
        .iter()
        .map(|variant| {
            let stem = stems
                .iter()
                .find(|stem| stem.contains(&format!("-{variant}-")));
            stem.map(|stem| unpacked.join(stem).join("iggy"))
                .ok_or_else(|| format!("no {variant} archive in {}", dist.display()).into())
        })
        .collect()
}

/// Builds bin/iggy with each of [`FEATURES`] alone (type-checks; `cargo check` covers
/// `compile_error!` and every `cfg` of the composition module). A warning fails it too: code
/// that only some builds use is dead in the others.
pub(crate) fn check_features(sh: &Shell) -> Result<(), DynError> {
    for features in FEATURES {
        println!("bin/iggy with `{features}`");
        let output = cmd!(
            sh,
            "cargo check -p iggy --bin iggy --no-default-features --features {features}"
        )
        .ignore_status()
        .output()?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        eprint!("{stderr}");
        if !output.status.success() {
            return Err(format!("bin/iggy does not build with `{features}`").into());
        }
        if stderr.lines().any(|line| line.starts_with("warning")) {
            return Err(format!("bin/iggy warns with `{features}`").into());
        }
    }
    Ok(())
}

fn package_version(manifest: &Path) -> Result<String, DynError> {
    let text = std::fs::read_to_string(manifest)?;
    text.lines()
        .find_map(|line| line.strip_prefix("version = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .map(str::to_owned)
        .ok_or_else(|| format!("no version in {}", manifest.display()).into())
}

fn host_triple(sh: &Shell) -> Result<String, DynError> {
    let info = cmd!(sh, "rustc -vV").read()?;
    info.lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::to_owned)
        .ok_or_else(|| "rustc -vV names no host".into())
}
