//! Generates Rust code from `proto/thaw/v1`, with a vendored `protoc` so that a
//! fresh machine needs no system package.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; nothing else reads the environment now.
    unsafe { std::env::set_var("PROTOC", protoc) };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let files = ["common", "master", "jobs", "data", "journal"].map(|f| root.join(format!("thaw/v1/{f}.proto")));
    tonic_prost_build::configure().compile_protos(&files, std::slice::from_ref(&root))?;
    println!("cargo:rerun-if-changed={}", root.display());
    Ok(())
}
