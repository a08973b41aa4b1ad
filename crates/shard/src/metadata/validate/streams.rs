//! Stream requests: `CREATE_STREAM` (202), `DELETE_STREAM` (203), 0.11.0 `UPDATE_STREAM`
//! (204).

use proto::commands::legacy::UpdateStream;
use proto::commands::streams::{CreateStream, DeleteStream};

use crate::metadata::options::check_stream_create_options;
use crate::metadata::permissions::{can_create_stream, can_manage_stream, require};
use crate::metadata::resolve::lowest_free_id;
use crate::metadata::{Metadata, MetadataOp, User};
use crate::refusal::{Limit, Refusal, Taken, TopicOption};

/// Streams a server holds (`MAX_STREAMS`, exclusive).
pub const STREAMS_MAX: usize = 1 << 20;

/// `CREATE_STREAM`: `41`, `1012` name taken, `1020` too many, option refusals.
pub fn create_stream(
    metadata: &Metadata,
    actor: &User,
    request: &CreateStream,
    now_micros: u64,
) -> Result<MetadataOp, Refusal> {
    require(can_create_stream(actor))?;
    check_stream_name_free(metadata, request.name.as_str(), None)?;
    check_stream_create_options(&request.options)?;
    if metadata.streams.len() >= STREAMS_MAX {
        return Err(Refusal::Limit(Limit::Streams));
    }
    let id =
        lowest_free_id(metadata.streams.keys().copied()).ok_or(Refusal::Limit(Limit::Streams))?;
    Ok(MetadataOp::CreateStream {
        id,
        name: String::from(request.name.as_str()),
        created_at: now_micros,
        options: request.options.clone(),
    })
}

/// `DELETE_STREAM`: `1009`, `41`.
pub fn delete_stream(
    metadata: &Metadata,
    actor: &User,
    request: &DeleteStream,
) -> Result<MetadataOp, Refusal> {
    let stream = metadata.stream(&request.stream_id)?;
    require(can_manage_stream(actor, stream.id))?;
    Ok(MetadataOp::DeleteStream { id: stream.id })
}

/// 0.11.0 `UPDATE_STREAM`: a rename (the current name when unchanged); no option keys.
pub fn update_stream_legacy(
    metadata: &Metadata,
    actor: &User,
    request: &UpdateStream,
) -> Result<MetadataOp, Refusal> {
    let stream = metadata.stream(&request.stream_id)?;
    require(can_manage_stream(actor, stream.id))?;
    if !request.options.is_empty() {
        return Err(Refusal::TopicOption(TopicOption::UnsupportedKey));
    }
    rename_stream(metadata, stream.id, request.name.as_str())
}

/// A rename of stream `id`; renaming to the current name is a no-op update.
pub(super) fn rename_stream(
    metadata: &Metadata,
    id: u32,
    name: &str,
) -> Result<MetadataOp, Refusal> {
    check_stream_name_free(metadata, name, Some(id))?;
    Ok(MetadataOp::UpdateStream {
        id,
        name: Some(String::from(name)),
        options: None,
    })
}

fn check_stream_name_free(
    metadata: &Metadata,
    name: &str,
    except: Option<u32>,
) -> Result<(), Refusal> {
    let taken = metadata
        .streams
        .values()
        .any(|stream| stream.name == name && Some(stream.id) != except);
    if taken {
        return Err(Refusal::Taken(Taken::StreamName));
    }
    Ok(())
}
