// `sqlx::migrate!` embeds `migrations/` at compile time; without this a new migration is not
// picked up by an incremental build (sqlx's documented build script).
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
