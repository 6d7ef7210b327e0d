//! Decides whether the mount tests can run here: they need `/dev/fuse` and `fusermount3`
//! (Linux). Where either is missing they are compiled as ignored — `cargo test` lists them
//! as ignored, with the reason, and this script says why in a build warning — instead of
//! passing without having mounted anything. Under CI (`CI=true`) a missing FUSE is an error:
//! CI must mount.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(fuse_unavailable)");
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-changed=/dev/fuse");
    // The mount tests drive Linux's FUSE (fusermount3, /proc/mounts): elsewhere they never run.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        println!("cargo::rustc-cfg=fuse_unavailable");
        return;
    }
    let device = Path::new("/dev/fuse").exists();
    let helper = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            let candidate = dir.join("fusermount3");
            // A helper installed later is seen at the next build.
            println!("cargo::rerun-if-changed={}", candidate.display());
            candidate.is_file()
        })
    });
    if device && helper {
        return;
    }
    let why = format!("FUSE unavailable (/dev/fuse: {device}, fusermount3: {helper})");
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{why}; CI must be able to mount");
    }
    println!("cargo::warning={why}: the mount tests are ignored");
    println!("cargo::rustc-cfg=fuse_unavailable");
}
