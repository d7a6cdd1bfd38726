//! The master's web dashboard (`--web-port`): workers with their tiers,
//! liveness and migration estimates; jobs with their progress; the file tree
//! with each file's blocks and replicas; the live migration event log.
//!
//! Pages are rendered on the server from the master's in-process state (the
//! same methods the gRPC calls use), with no JavaScript: the events page
//! refreshes itself with a `<meta http-equiv="refresh">`. Templates are
//! [askama](https://docs.rs/askama)'s: compiled into the binary (nothing to
//! build or fetch at run time), type-checked against their structs, and every
//! value is HTML-escaped unless a template marks it safe (none does), so a file
//! named `<script>` is shown, not run. Askama keeps the markup in `.html` files
//! beside this module (`web/`), where it reads as HTML, which maud's macros
//! would not. Query input is checked here: a bad path is a 400 page, a missing
//! one a 404 page; no input makes a handler panic.

mod query;
mod view;

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use thaw_common::proto::{GetStatusRequest, ListJobsRequest, ListStatusRequest};
use thaw_common::{ErrorKind, ThawError};
use tokio::net::TcpListener;

use crate::master::Master;
use query::{file_href, files_href};

/// Migration events the events page shows, newest first.
pub const EVENTS_SHOWN: usize = 200;

/// A page that could not be shown, and why (rendered as an error page).
#[derive(Debug, PartialEq)]
pub enum WebError {
    /// Malformed input: a bad query or path.
    BadRequest(String),
    NotFound(String),
    Internal(String),
}

impl From<ThawError> for WebError {
    fn from(e: ThawError) -> Self {
        match e.kind {
            ErrorKind::NotFound => WebError::NotFound(e.message),
            ErrorKind::InvalidArgument | ErrorKind::NotADirectory | ErrorKind::IsADirectory => {
                WebError::BadRequest(e.message)
            }
            _ => WebError::Internal(e.message),
        }
    }
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            WebError::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            WebError::NotFound(m) => (StatusCode::NOT_FOUND, m),
            WebError::Internal(m) => (StatusCode::INTERNAL_SERVER_ERROR, m),
        };
        match view::error_page(status, &message) {
            Ok(html) => (status, Html(html)).into_response(),
            Err(_) => (status, message).into_response(),
        }
    }
}

type Page = Result<Response, WebError>;

fn html(r: askama::Result<String>) -> Page {
    r.map(|s| Html(s).into_response()).map_err(|e| WebError::Internal(format!("rendering failed: {e}")))
}

/// The dashboard's routes over `master`.
pub fn router(master: Arc<Master>) -> axum::Router {
    axum::Router::new()
        .route("/", get(overview))
        .route("/jobs", get(jobs))
        .route("/files", get(files))
        .route("/file", get(file))
        .route("/events", get(events))
        .route("/style.css", get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], view::CSS) }))
        .fallback(|uri: axum::http::Uri| async move {
            WebError::NotFound(format!("no page at {}: see the links above", uri.path()))
        })
        .layer(axum::middleware::from_fn_with_state(master.clone(), require_superuser))
        .with_state(master)
}

/// On a master with a secret the dashboard shows every path, so it is the
/// superuser's: a superuser's token as the password of HTTP Basic
/// authentication (a browser asks for it; `curl -u :TOKEN`), or as
/// `Authorization: Bearer TOKEN`.
async fn require_superuser(
    State(m): State<Arc<Master>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let Some(secret) = m.secret() else { return next.run(req).await };
    let header = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("");
    let token = if let Some(t) = header.strip_prefix("Bearer ") {
        Some(t.to_string())
    } else {
        use base64::Engine;
        header
            .strip_prefix("Basic ")
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b.trim()).ok())
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.split_once(':').map(|(_, password)| password.to_string()))
    };
    match token.map(|t| secret.verify(&t)) {
        Some(Ok(c)) if thaw_common::auth::is_superuser(&c.user, &c.groups) || c.user == m.config().superuser => {
            next.run(req).await
        }
        Some(Ok(c)) => {
            (StatusCode::FORBIDDEN, format!("the dashboard is the superuser's, not {}'s\n", c.user)).into_response()
        }
        Some(Err(e)) => unauthorized(&e.message),
        None => unauthorized("this dashboard asks for a superuser's token as the password (`thaw auth token`)"),
    }
}

fn unauthorized(why: &str) -> Response {
    (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Basic realm=\"thaw\"")], format!("{why}\n")).into_response()
}

/// Serves the dashboard on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    master: Arc<Master>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(master)).with_graceful_shutdown(shutdown).await
}

async fn overview(State(m): State<Arc<Master>>) -> Page {
    html(view::overview(&m))
}

async fn jobs(State(m): State<Arc<Master>>) -> Page {
    let mut r = m.list_jobs(ListJobsRequest::default())?;
    // The page shows what jobs hold now; `thaw jobs` also lists ended ones.
    r.jobs.retain(|j| !j.ended);
    html(view::jobs(&m, r))
}

async fn events(State(m): State<Arc<Master>>) -> Page {
    html(view::events(&m, m.recent_migration_events(EVENTS_SHOWN)))
}

async fn files(State(m): State<Arc<Master>>, RawQuery(q): RawQuery) -> Page {
    let path = query::path(q.as_deref())?.unwrap_or_else(|| "/".to_string());
    let st = m.get_status(GetStatusRequest { path: path.clone(), ..Default::default() }).await?;
    if !st.info.is_some_and(|i| i.is_dir) {
        return Ok(Redirect::to(&file_href(&path)).into_response());
    }
    let r = m.list_status(ListStatusRequest { path: path.clone(), ..Default::default() }).await?;
    html(view::directory(&m, &path, r.entries))
}

async fn file(State(m): State<Arc<Master>>, RawQuery(q): RawQuery) -> Page {
    let path =
        query::path(q.as_deref())?.ok_or_else(|| WebError::BadRequest("which file? give ?path=/a/file".to_string()))?;
    let st = m.get_status(GetStatusRequest { path: path.clone(), blocks: true, ..Default::default() }).await?;
    let info = st.info.ok_or_else(|| WebError::NotFound(format!("no such file or directory: {path}")))?;
    if info.is_dir {
        return Ok(Redirect::to(&files_href(&path)).into_response());
    }
    html(view::file(&m, info))
}
