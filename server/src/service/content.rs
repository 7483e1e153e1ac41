//! Content isolation per team (seed 004, "Content-addressable storage"). A team with
//! `isolateContent` hashes its uploads with HMAC-SHA256 under a key of its own, derived from
//! the instance's secret key (`CAIRN_SECRET_KEY` or `data/secret.key`): its content hashes,
//! and so its blob rows and files, are never shared with another team, and nobody without the
//! instance key can tell from a hash what a file holds. Other teams share one blob per
//! content (plain SHA-256).
//!
//! Switching isolation on applies to uploads from then on: blobs stored before keep their
//! hashes (and may stay shared) until their documents are replaced, and an upload of bytes
//! the team stored before the switch is a new document, not a duplicate.

use entity::prelude::Team;

use super::{Cairn, ServiceError, ServiceResult};
use crate::auth::Principal;
use crate::domain::Capability;
use crate::ingest::blobs::ContentKey;

impl Cairn {
    /// How the team's uploads are hashed now.
    pub(crate) async fn content_key(&self, team_id: i64) -> ServiceResult<ContentKey> {
        let isolated = self
            .store
            .teams_by_ids(&[team_id])
            .await?
            .first()
            .is_some_and(|t| t.isolate_content);
        if !isolated {
            return Ok(ContentKey::Shared);
        }
        let secret = self.secret.as_ref().ok_or_else(|| {
            ServiceError::Unavailable(
                "this team's content is isolated, and this process has no secret key to hash it with".into(),
            )
        })?;
        Ok(ContentKey::Team(secret.derive(&format!(
            "cairn content-isolation team={team_id}"
        ))))
    }

    /// Sets whether the caller's team isolates its content (admins); the team as it is now.
    pub async fn set_content_isolation(&self, p: &Principal, isolate: bool) -> ServiceResult<Team> {
        p.require(Capability::Admin)?;
        if isolate && self.secret.is_none() {
            return Err(ServiceError::Unavailable(
                "content isolation needs the instance's secret key".into(),
            ));
        }
        let team = self
            .store
            .set_team_isolation(p.team_id, isolate)
            .await?
            .ok_or(ServiceError::NotFound("team"))?;
        self.store
            .audit(
                Some(p.team_id),
                Some(p.user_id),
                if isolate {
                    "team.isolate_content.on"
                } else {
                    "team.isolate_content.off"
                },
                None,
            )
            .await?;
        Ok(team)
    }
}
