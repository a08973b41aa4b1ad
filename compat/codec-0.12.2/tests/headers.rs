//! Request headers the SDK builds parse with `proto::header::RequestHeader`, and the reply and
//! eviction headers `proto` builds pass the checks the SDK client applies to them.

mod common;

use bytemuck::checked::try_pod_read_unaligned;
use common::DIALECT;
use iggy_binary_protocol::consensus::{
    Command, ConsensusHeader, EvictionHeader as SdkEviction, EvictionReason as SdkReason,
    Operation as SdkOperation, ReplyHeader as SdkReply, RequestHeader as SdkRequest,
};
use iggy_binary_protocol::{COMMAND_TABLE, HEADER_SIZE, PartitionContext as SdkContext};
use iggy_common::{IggyError, eviction_reason_to_error};
use proto::dialect::ProtocolVersion;
use proto::header::{
    EvictionHeader, EvictionReason, Operation, PartitionContext, ReplyHeader, RequestHeader,
};
use zerocopy::IntoBytes;

const CLIENT: u128 = 0x1234_5678_9abc_def0_0fed_cba9_8765_4321;
const SESSION: u64 = 77;
const REQUEST: u64 = 9;

/// The header the SDK sends for `code` while bound (login codes unbound, as the SDK does).
fn sdk_request(code: u32, body_length: usize) -> SdkRequest {
    let body = vec![0xa5; body_length];
    let (request, session) = match code {
        40 | 45 => (0, 0),
        _ => (REQUEST, SESSION),
    };
    SdkRequest::for_request(code, CLIENT, request, session, &body).expect("SDK header")
}

fn frame(header: &SdkRequest) -> Vec<u8> {
    let mut bytes = bytemuck::bytes_of(header).to_vec();
    bytes.resize(header.size as usize, 0xa5);
    bytes
}

#[test]
fn every_sdk_request_header_parses_with_its_code_and_operation() {
    for meta in COMMAND_TABLE {
        let sdk = sdk_request(meta.code, 3);
        let bytes = frame(&sdk);
        let ours = RequestHeader::parse(&bytes, DIALECT)
            .unwrap_or_else(|error| panic!("code {}: {error:?}", meta.code));
        assert_eq!(ours.operation, sdk.operation as u8, "code {}", meta.code);
        let operation = ours.operation().expect("a known operation");
        assert!(operation.is_valid_in(DIALECT), "code {}", meta.code);
        let expected_code = if sdk.operation == SdkOperation::Register {
            40
        } else {
            meta.code
        };
        assert_eq!(ours.code(), Some(expected_code), "code {}", meta.code);
        assert_eq!(ours.client.get(), CLIENT);
        assert_eq!(ours.request.get(), sdk.request);
        assert_eq!(ours.session.get(), sdk.session);
        assert_eq!(ours.request_checksum.get(), sdk.request_checksum);
        assert_eq!(ours.size.get(), sdk.size);
        assert_eq!(ours.partition_context(), PartitionContext::default());
    }
}

#[test]
fn unknown_codes_travel_as_non_replicated_and_are_read_back() {
    for code in [0, 2, 999, u32::MAX] {
        let bytes = frame(&sdk_request(code, 0));
        let ours = RequestHeader::parse(&bytes, DIALECT).expect("a well-formed header");
        assert_eq!(ours.operation(), Some(Operation::NonReplicated));
        assert_eq!(ours.code(), Some(code));
    }
}

#[test]
fn unbound_ping_parses() {
    let sdk = SdkRequest::for_request(1, CLIENT, 0, 0, &[]).expect("SDK header");
    let bytes = frame(&sdk);
    let ours = RequestHeader::parse(&bytes, DIALECT).expect("an unbound ping");
    assert_eq!(ours.code(), Some(1));
    assert_eq!((ours.session.get(), ours.request.get()), (0, 0));
}

#[test]
fn partition_context_stamped_by_the_sdk_reads_back() {
    let context = SdkContext {
        incarnation: 0x0102_0304_0506_0708,
        owner_generation: 42,
        metadata_op: u64::MAX,
    };
    for code in [101, 106, 109, 121, 122] {
        let mut sdk = sdk_request(code, 8);
        context.stamp(&mut sdk);
        let bytes = frame(&sdk);
        let ours = RequestHeader::parse(&bytes, DIALECT).expect("a stamped header");
        let expected = PartitionContext {
            incarnation: context.incarnation,
            owner_generation: context.owner_generation,
            metadata_op: context.metadata_op,
        };
        assert_eq!(ours.partition_context(), expected, "code {code}");
    }
}

#[test]
fn deferred_cancellation_headers_parse() {
    for code in [106, 109] {
        let cancel = sdk_request(code, 4)
            .deferred_cancellation()
            .expect("a cancellation");
        let bytes = frame(&cancel);
        let ours = RequestHeader::parse(&bytes, DIALECT).expect("a cancellation");
        assert_eq!(ours.code(), Some(108));
        assert_eq!(ours.request.get(), REQUEST);
    }
}

#[test]
fn our_request_headers_satisfy_the_sdk_validator() {
    let mut ours = RequestHeader::new(CLIENT, Operation::CreateStream, 10);
    ours.session.set(SESSION);
    ours.request.set(REQUEST);
    let sdk: SdkRequest = try_pod_read_unaligned(ours.as_bytes()).expect("an SDK bit pattern");
    sdk.validate().expect("SDK validation");
    assert_eq!(sdk.operation, SdkOperation::CreateStream);
    assert_eq!(sdk.size as usize, HEADER_SIZE + 10);
}

/// The operation bytes each crate accepts for this dialect, value by value.
#[test]
fn operation_values_agree() {
    for value in 0..=u8::MAX {
        // 0 is a valid bit pattern for the SDK but refused by its header validator.
        let sdk = bytemuck::checked::try_cast::<u8, SdkOperation>(value)
            .ok()
            .filter(|operation| *operation != SdkOperation::Reserved);
        let ours = Operation::from_u8(value).filter(|operation| operation.is_valid_in(DIALECT));
        assert_eq!(sdk.is_some(), ours.is_some(), "operation byte {value}");
        let (Some(sdk), Some(ours)) = (sdk, ours) else {
            continue;
        };
        let sdk_framed = sdk.is_result_framed() || sdk == SdkOperation::Register;
        assert_eq!(
            sdk_framed,
            ours.is_result_framed(),
            "result framing of {value}"
        );
    }
}

/// A reply header as the SDK client reads it: a typed view that must validate.
fn sdk_view(reply: &ReplyHeader) -> SdkReply {
    let bytes = reply.as_bytes();
    assert_eq!(bytes[60], Command::Reply as u8);
    let sdk: SdkReply = try_pod_read_unaligned(bytes).expect("an SDK reply bit pattern");
    sdk.validate().expect("SDK reply validation");
    sdk
}

#[test]
fn our_reply_header_answers_every_sdk_request() {
    for meta in COMMAND_TABLE {
        let request = sdk_request(meta.code, 5);
        let bytes = frame(&request);
        let parsed = RequestHeader::parse(&bytes, DIALECT).expect("a request header");
        let operation = parsed.operation().expect("a known operation");
        let reply = ReplyHeader::for_request(parsed, operation, 0, 31, 12);
        let sdk = sdk_view(&reply);
        assert_eq!(sdk.request, request.request, "code {}", meta.code);
        assert_eq!(sdk.operation, request.operation, "code {}", meta.code);
        assert_eq!(sdk.size as usize, HEADER_SIZE + 12);
        assert_eq!(sdk.status, 0);
        assert_eq!(sdk.commit, 31);
        assert!(!sdk.has_committed_result(), "code {}", meta.code);
    }
}

#[test]
fn our_refusal_status_reaches_the_sdk_as_its_error() {
    let request = sdk_request(200, 5);
    let bytes = frame(&request);
    let parsed = RequestHeader::parse(&bytes, DIALECT).expect("a request header");
    for code in [2_u32, 40, 1009, 14003] {
        let reply = ReplyHeader::for_request(parsed, Operation::NonReplicated, code, 0, 0);
        let sdk = sdk_view(&reply);
        assert_eq!(sdk.status, code);
        assert_eq!(IggyError::from_code(sdk.status).as_code(), code);
        assert!(!sdk.has_committed_result());
    }
}

/// The SDK proves a retried call's outcome only when every echoed field of a committed reply
/// matches the request it sent.
#[test]
fn our_committed_marker_satisfies_the_sdk_correlation_check() {
    for code in [202, 302, 33, 121, 16] {
        let mut request = sdk_request(code, 5);
        SdkContext {
            incarnation: 5,
            owner_generation: 0,
            metadata_op: 0,
        }
        .stamp(&mut request);
        let bytes = frame(&request);
        let parsed = RequestHeader::parse(&bytes, DIALECT).expect("a request header");
        let mut reply = ReplyHeader::for_request(parsed, parsed.operation().unwrap(), 0, 0, 4);
        reply.mark_committed(1234);
        let sdk = sdk_view(&reply);
        assert!(sdk.has_committed_result(), "code {code}");
        assert_eq!(sdk.client, request.client);
        assert_eq!(sdk.request_checksum, request.request_checksum);
        assert_eq!(sdk.operation.request_operation(), request.operation);
        assert_eq!(sdk.partition_incarnation, request.partition_incarnation);
        assert!(sdk.op != 0 && sdk.op == sdk.commit);
    }
}

#[test]
fn our_evictions_validate_and_map_to_the_sdk_errors() {
    for reason in EvictionReason::ALL {
        if matches!(
            reason,
            EvictionReason::ClientReleaseTooLow | EvictionReason::ClientReleaseTooHigh
        ) {
            // Never sent by a one-node server; the SDK's validator wants release bounds.
            continue;
        }
        let ours = EvictionHeader::new(CLIENT, reason);
        let sdk: SdkEviction = try_pod_read_unaligned(ours.as_bytes()).expect("SDK bit pattern");
        sdk.validate()
            .unwrap_or_else(|error| panic!("{reason:?}: {error:?}"));
        assert_eq!(sdk.reason as u8, reason.as_u8());
        assert_eq!(sdk.client, CLIENT);
        let error = eviction_reason_to_error(
            sdk.reason,
            sdk.server_protocol_version,
            sdk.server_protocol_version_min,
        );
        assert_eq!(
            error.as_code(),
            reason.client_error().as_u32(),
            "{reason:?}"
        );
        if reason == EvictionReason::IncompatibleProtocol {
            assert_eq!(sdk.server_protocol_version, ProtocolVersion::ACCEPTED_MAX.0);
            assert_eq!(
                sdk.server_protocol_version_min,
                ProtocolVersion::ACCEPTED_MIN.0
            );
        }
    }
}

#[test]
fn sdk_evictions_parse_with_ours() {
    let reasons = [
        SdkReason::NoSession,
        SdkReason::InvalidCredentials,
        SdkReason::StaleClient,
    ];
    for reason in reasons {
        let sdk = SdkEviction::new(0, 0, 0, CLIENT, reason);
        let ours = EvictionHeader::parse(bytemuck::bytes_of(&sdk)).expect("an eviction");
        assert_eq!(ours.reason().map(EvictionReason::as_u8), Some(reason as u8));
    }
    let sdk = SdkEviction::incompatible_protocol(0, 0, 0, CLIENT, 0x3002, 0x3002);
    let ours = EvictionHeader::parse(bytemuck::bytes_of(&sdk)).expect("an eviction");
    assert_eq!(ours.reason(), Some(EvictionReason::IncompatibleProtocol));
    assert_eq!(ours.server_protocol_version.get(), 0x3002);
}

/// Our result sections (success and refusal) read back through the SDK's section parser.
#[test]
fn our_result_sections_read_back_with_the_sdk() {
    use iggy_binary_protocol::consensus::{result_code, result_section_len};
    use proto::result::{REFUSAL_LENGTH, ResultSection};

    let mut ok = Vec::new();
    ResultSection::Ok.encode(&mut proto::Writer::new(&mut ok, DIALECT));
    ok.extend_from_slice(b"payload");
    assert_eq!(result_code(&ok), Some(0));
    assert_eq!(result_section_len(&ok), Some(4));

    for code in [1_u32, 1009, 5000, u32::MAX] {
        let mut refused = Vec::new();
        ResultSection::Refused(code).encode(&mut proto::Writer::new(&mut refused, DIALECT));
        assert_eq!(refused.len(), REFUSAL_LENGTH);
        assert_eq!(result_code(&refused), Some(code));
        assert_eq!(result_section_len(&refused), Some(REFUSAL_LENGTH));
        let mut reader = proto::Reader::new(&refused, DIALECT);
        assert_eq!(
            ResultSection::decode(&mut reader),
            Ok(ResultSection::Refused(code))
        );
    }
}

/// The SDK's own rejection writer produces the bytes our decoder reads as that refusal.
#[test]
fn sdk_rejection_sections_decode_with_ours() {
    use iggy_binary_protocol::consensus::{REJECTION_SECTION_LEN, write_rejection_section};
    use proto::result::ResultSection;

    let mut bytes = [0_u8; REJECTION_SECTION_LEN];
    write_rejection_section(&mut bytes, 2012);
    let mut reader = proto::Reader::new(&bytes, DIALECT);
    assert_eq!(
        ResultSection::decode(&mut reader),
        Ok(ResultSection::Refused(2012))
    );
    assert!(reader.is_empty());
}
