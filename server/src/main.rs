//! The `cairn` command line: `serve`, `migrate`, `user create`, `token create|revoke`,
//! `schema`.

use std::process::ExitCode;

use cairn::app;
use cairn::auth;
use cairn::config::{Config, LogFormat};
use cairn::domain::{self, Role};
use cairn::service::{DEFAULT_TEAM, INITIAL_TOKEN_FILE};
use cairn::Store;
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

mod bulk;
mod remote;

#[derive(Parser)]
#[command(name = "cairn", version, about = "A self-hosted knowledge server")]
struct Cli {
    #[command(flatten)]
    config: Config,
    #[command(subcommand)]
    command: Command,
}

/// The extraction child's arguments (`cairn __extract`, run by an ingest job once per file so a
/// hostile file cannot take the server down; see `cairn::extraction_child_main`). Parsed on
/// their own, before the async runtime and the server's configuration exist: the child needs
/// neither, and it runs once per ingested file.
#[derive(Parser)]
#[command(name = "cairn __extract")]
struct ExtractArgs {
    path: std::path::PathBuf,
    #[arg(long)]
    filename: String,
    #[arg(long, default_value_t = 2048)]
    memory_mb: u64,
    /// OCR (all `--ocr-…` options come from the parent; without `--ocr-tesseract`, none).
    #[arg(long)]
    ocr_tesseract: Option<std::path::PathBuf>,
    #[arg(long)]
    ocr_pdftoppm: Option<std::path::PathBuf>,
    #[arg(long)]
    ocr_prlimit: Option<std::path::PathBuf>,
    #[arg(long, default_value = "eng")]
    ocr_language: String,
    #[arg(long, default_value_t = 300)]
    ocr_dpi: u32,
    #[arg(long, default_value_t = 60)]
    ocr_page_secs: u64,
    #[arg(long, default_value_t = 1024)]
    ocr_page_mb: u64,
    #[arg(long, default_value_t = 1)]
    ocr_jobs: usize,
}

fn extract_main() -> ExitCode {
    // The command word stands where clap expects the program's name.
    let a = ExtractArgs::parse_from(std::env::args_os().skip(1));
    let ocr = a.ocr_tesseract.map(|tesseract| cairn_extract::ocr::Ocr {
        tesseract,
        pdftoppm: a.ocr_pdftoppm,
        prlimit: a.ocr_prlimit,
        language: a.ocr_language,
        dpi: a.ocr_dpi,
        page_timeout: std::time::Duration::from_secs(a.ocr_page_secs.max(1)),
        page_memory_mb: a.ocr_page_mb,
        jobs: a.ocr_jobs.max(1),
    });
    let code = cairn::extraction_child_main(&a.path, &a.filename, a.memory_mb, ocr.as_ref());
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (console and API).
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Manage users.
    #[command(subcommand)]
    User(UserCommand),
    /// Manage corpora (system corpora are created only here).
    #[command(subcommand)]
    Corpus(CorpusCommand),
    /// Manage API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Print the GraphQL schema (SDL).
    Schema,
    /// Bulk-load files or directories (recursively) into a corpus, with progress bars.
    Ingest {
        /// Files or directories.
        #[arg(required = true)]
        paths: Vec<std::path::PathBuf>,
        /// Corpus name (created in the team when missing).
        #[arg(long)]
        corpus: String,
        /// Team name. Default: the default team.
        #[arg(long)]
        team: Option<String>,
        /// Uploading user's id. Default: the team's first owner.
        #[arg(long)]
        user: Option<i64>,
        /// Make the documents private to the uploading user.
        #[arg(long)]
        private: bool,
        /// Load into a system corpus (readable by every team; created when missing). Only the
        /// operator writes system corpora: no token can.
        #[arg(long, conflicts_with = "server")]
        system: bool,
        /// Go through a running server's API (e.g. http://127.0.0.1:8080) instead of the
        /// database: uploads as the token's user, into the token's team.
        #[arg(long)]
        server: Option<String>,
        /// The token for `--server` (default: $CAIRN_TOKEN).
        #[arg(long, env = "CAIRN_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
}

#[derive(Subcommand)]
enum UserCommand {
    /// Create a user; prints its id.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long, default_value = "member", value_parser = parse_role)]
        role: Role,
        /// Team name; created when missing. Default: the only team.
        #[arg(long)]
        team: Option<String>,
    },
}

#[derive(Subcommand)]
enum CorpusCommand {
    /// Create a corpus; prints its id.
    Create {
        /// The corpus name.
        name: String,
        /// Team name (created when missing). Default: the default team. Not with --system.
        #[arg(long)]
        team: Option<String>,
        /// A system corpus: readable by every team, written only from this command line
        /// (`cairn ingest --system`), never through a team's token.
        #[arg(long)]
        system: bool,
        #[arg(long)]
        description: Option<String>,
    },
    /// List the corpora a team sees (its own and the system corpora): id, kind, name.
    List {
        /// Team name. Default: the default team.
        #[arg(long)]
        team: Option<String>,
    },
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Create a token for a user; prints the secret once.
    Create {
        #[arg(long)]
        user: i64,
        #[arg(long)]
        label: Option<String>,
    },
    /// Revoke a token by id.
    Revoke { id: i64 },
}

fn parse_role(s: &str) -> Result<Role, String> {
    s.parse::<Role>().map_err(|e| e.to_string())
}

#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error(transparent)]
    Start(#[from] app::StartError),
    #[error(transparent)]
    Store(#[from] cairn::StoreError),
    #[error(transparent)]
    Invalid(#[from] domain::InvalidInput),
    #[error("{0}")]
    Usage(String),
}

fn init_tracing(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,sea_orm=warn,tower_http=info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

fn main() -> ExitCode {
    // The extraction child first: it is started once per ingested file, and the server's
    // configuration (dozens of options, each with its environment variable), the async runtime
    // and the logger would be most of its start-up.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == cairn::EXTRACTION_COMMAND)
    {
        return extract_main();
    }
    // Before the runtime's threads exist (it sets an environment variable).
    cairn_embed::configure_process();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(cli_main())
}

async fn cli_main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.config.log_format);
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), CliError> {
    let cfg = cli.config;
    match cli.command {
        Command::Serve => serve(&cfg).await,
        Command::Migrate => {
            app::open_store(&cfg).await?;
            println!("migrations applied");
            Ok(())
        }
        Command::Schema => {
            print!("{}", cairn::sdl());
            Ok(())
        }
        Command::Ingest {
            paths,
            corpus,
            team,
            user,
            private,
            system,
            server: Some(server),
            token,
        } => {
            if team.is_some() || user.is_some() {
                return Err(CliError::Usage(
                    "--team and --user do not apply with --server: the token says who uploads"
                        .into(),
                ));
            }
            let token = token.ok_or_else(|| {
                CliError::Usage("--server needs a token: --token or $CAIRN_TOKEN".into())
            })?;
            let _ = system;
            remote::ingest(&server, &token, &paths, &corpus, private)
                .await
                .map_err(CliError::Usage)
        }
        Command::Ingest {
            paths,
            corpus,
            team,
            user,
            private,
            system,
            server: None,
            ..
        } => bulk::ingest(
            &cfg,
            &paths,
            &corpus,
            bulk::Options {
                team: team.as_deref(),
                user,
                private,
                system,
            },
        )
        .await
        .map_err(CliError::Usage),
        Command::User(UserCommand::Create { name, role, team }) => {
            let store = app::open_store(&cfg).await?;
            let team = resolve_team(&store, team.as_deref()).await?;
            let name = domain::clean_name(&name, "user name")?;
            let user = store.create_user(team.id, &name, role).await?;
            audit_cli(&store, Some(team.id), "user.create", user.id).await?;
            println!("{}", user.id);
            eprintln!("created user {} ({role}) in team {}", user.name, team.name);
            Ok(())
        }
        Command::Corpus(CorpusCommand::Create {
            name,
            team,
            system,
            description,
        }) => {
            let store = app::open_store(&cfg).await?;
            let name = domain::clean_name(&name, "corpus name")?;
            let description = description
                .as_deref()
                .map(str::trim)
                .filter(|d| !d.is_empty());
            let (team_id, existing) = if system {
                if team.is_some() {
                    return Err(CliError::Usage(
                        "--team does not apply with --system: a system corpus has no team".into(),
                    ));
                }
                (None, store.system_corpus_by_name(&name).await?)
            } else {
                let team = resolve_team(&store, team.as_deref()).await?;
                let existing = store.team_corpus_by_name(team.id, &name).await?;
                (Some(team.id), existing)
            };
            if let Some(c) = existing {
                return Err(CliError::Usage(format!(
                    "a corpus named `{name}` exists already (id {})",
                    c.id
                )));
            }
            let corpus = store.create_corpus(team_id, &name, description).await?;
            audit_cli(&store, team_id, "corpus.create", corpus.id).await?;
            println!("{}", corpus.id);
            eprintln!(
                "created {} corpus {}",
                if system { "system" } else { "team" },
                corpus.name
            );
            Ok(())
        }
        Command::Corpus(CorpusCommand::List { team }) => {
            let store = app::open_store(&cfg).await?;
            let team = resolve_team(&store, team.as_deref()).await?;
            let mut after = None;
            loop {
                let page = store.visible_corpora(team.id, after, 200).await?;
                let Some(last) = page.last() else { break };
                after = Some(last.id);
                for c in &page {
                    let kind = if c.system { "system" } else { "team" };
                    println!("{}\t{kind}\t{}", c.id, c.name);
                }
            }
            Ok(())
        }
        Command::Token(TokenCommand::Create { user, label }) => {
            let store = app::open_store(&cfg).await?;
            let u = store
                .user(user)
                .await?
                .ok_or_else(|| CliError::Usage(format!("no user with id {user}")))?;
            let secret = auth::generate_token();
            let row = store
                .create_token(u.id, &secret.hash, label.as_deref())
                .await?;
            audit_cli(&store, Some(u.team_id), "token.create", row.id).await?;
            println!("{}", secret.secret);
            eprintln!("token {} for user {} (shown once)", row.id, u.name);
            Ok(())
        }
        Command::Token(TokenCommand::Revoke { id }) => {
            let store = app::open_store(&cfg).await?;
            if store.token(id).await?.is_none() {
                return Err(CliError::Usage(format!("no token with id {id}")));
            }
            let revoked = store.revoke_token(id).await?;
            audit_cli(&store, None, "token.revoke", id).await?;
            println!(
                "{}",
                if revoked {
                    "revoked"
                } else {
                    "already revoked"
                }
            );
            Ok(())
        }
    }
}

/// An audit row for an operator's command (no acting user: whoever runs the binary).
async fn audit_cli(
    store: &Store,
    team_id: Option<i64>,
    action: &str,
    target: i64,
) -> Result<(), CliError> {
    store
        .audit(team_id, None, action, Some(&target.to_string()))
        .await?;
    Ok(())
}

async fn resolve_team(
    store: &Store,
    name: Option<&str>,
) -> Result<entity::prelude::Team, CliError> {
    match name {
        Some(n) => {
            let n = domain::clean_name(n, "team name")?;
            match store.team_by_name(&n).await? {
                Some(t) => Ok(t),
                None => Ok(store.create_team(&n).await?),
            }
        }
        None => match store.team_by_name(DEFAULT_TEAM).await? {
            Some(t) => Ok(t),
            None => Err(CliError::Usage(
                "no default team yet: pass --team NAME, or start `cairn serve` once".into(),
            )),
        },
    }
}

async fn serve(cfg: &Config) -> Result<(), CliError> {
    let running = app::start(cfg).await?;
    if let Some(b) = &running.bootstrap {
        let path = cfg.data_dir.join(INITIAL_TOKEN_FILE);
        println!();
        println!(
            "Cairn created team \"{}\" and its owner \"{}\".",
            b.team.name, b.owner.name
        );
        println!(
            "Login token (shown once; also saved to {} with mode 0600):",
            path.display()
        );
        println!();
        println!("    {}", b.token);
        println!();
    }
    println!("Cairn is listening on http://{}", running.addr);
    tokio::select! {
        r = running.wait() => r?,
        _ = shutdown_signal() => {
            tracing::info!("shutting down");
        }
    }
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
