//! A broker of the test's own configuration on a free loopback port, and
//! clients of it.

/// The secret the test configurations sign their tokens with.
pub const SECRET: &str = "0123456789abcdef0123456789abcdef";

/// A broker on a free loopback port, configured by `body` after the
/// `secret` line, on the SQLite database file `db`.
pub async fn start_broker(body: &str, db: &std::path::Path) -> braid_broker::Broker {
    let text = format!("secret = \"{SECRET}\"\n{body}");
    let config = braid_broker::Config::parse(&text, std::path::Path::new("test.toml"))
        .expect("test config is valid");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    braid_broker::Broker::start(config, db.to_str().expect("utf-8 path"), listener)
        .await
        .expect("broker starts")
}

/// A client of `b` holding a token for `user` as `role`.
pub fn client_for(
    b: &braid_broker::Broker,
    user: &str,
    role: braid_broker::Role,
) -> braid_broker::Client {
    let token = braid_broker::Auth::new(SECRET.as_bytes())
        .issue(user, role, 4_000_000_000)
        .expect("issue");
    braid_broker::Client::new(&format!("http://{}", b.addr()), &token).expect("client")
}
