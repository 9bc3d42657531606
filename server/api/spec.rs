//! The answers every operation can give besides its own, added to the OpenAPI document in one
//! place so that no route forgets one: problems are `application/problem+json`; a bad token is
//! 401 and a weak one 403; a body can be malformed (400), too large (413) or not JSON (415); a
//! path or query can name nothing (404) or be refused (422); a database outage is 503 and our
//! own failure 500. The public health checks and the signed hooks are marked `security: []`. The
//! limits the server enforces everywhere are declared here too: no string holds NUL, and a header
//! is a string, never `null`.

use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, Response, ResponseBuilder};

const PROBLEM: &str = "application/problem+json";

/// `(status, component name, description)` of the shared problem responses.
const SHARED: [(&str, &str, &str); 9] = [
    ("400", "BadRequest", "The body is not valid JSON, or a header is malformed"),
    ("401", "Unauthorized", "No token, or one that is unknown or revoked"),
    ("403", "Forbidden", "The token's scope (or the agent it belongs to) does not allow this"),
    ("404", "NotFound", "Nothing has this id or name"),
    ("413", "PayloadTooLarge", "The body is larger than 4 MiB"),
    ("415", "UnsupportedMediaType", "The body is not sent as application/json"),
    ("422", "Invalid", "A parameter or field is invalid; `errors` names each"),
    ("500", "Internal", "The server failed; the cause is logged, not told"),
    ("503", "Unavailable", "The database cannot be reached; retry after `Retry-After` seconds"),
];

pub fn complete(openapi: &mut OpenApi) {
    let components = openapi.components.get_or_insert_with(Default::default);
    for (_, name, description) in SHARED {
        components.responses.insert(name.into(), RefOr::T(problem(description)));
    }
    for schema in components.schemas.values_mut() {
        no_nul(schema);
    }
    for (path, item) in openapi.paths.paths.iter_mut() {
        let public = !path.starts_with("/api/v1/") || path.starts_with("/api/v1/hooks/");
        for operation in operations(item) {
            as_problems(operation);
            headers_as_sent(operation);
            for parameter in operation.parameters.iter_mut().flatten() {
                parameter.schema.iter_mut().for_each(no_nul);
            }
            if public {
                operation.security = Some(Vec::new());
            }
            if path.starts_with("/api/v1/") {
                add_shared(operation, path, public);
            }
        }
    }
}

/// No text the API takes or gives holds NUL (PostgreSQL cannot store it; a request with one is
/// refused, 422): a string without a pattern of its own says so with one.
fn no_nul(schema: &mut RefOr<utoipa::openapi::schema::Schema>) {
    use utoipa::openapi::schema::{ArrayItems, Schema, SchemaType};
    use utoipa::openapi::Type;
    match schema {
        RefOr::T(Schema::Object(object)) => {
            let is_string = match &object.schema_type {
                SchemaType::Type(t) => *t == Type::String,
                SchemaType::Array(types) => types.contains(&Type::String),
                SchemaType::AnyValue => false,
            };
            if is_string && object.pattern.is_none() && object.enum_values.is_none() && object.format.is_none() {
                object.pattern = Some("^[^\\x00]*$".into());
            }
            object.properties.values_mut().for_each(no_nul);
        }
        RefOr::T(Schema::Array(array)) => {
            if let ArrayItems::RefOrSchema(items) = &mut array.items {
                no_nul(items);
            }
        }
        RefOr::T(Schema::OneOf(one_of)) => one_of.items.iter_mut().for_each(no_nul),
        RefOr::T(Schema::AllOf(all_of)) => all_of.items.iter_mut().for_each(no_nul),
        _ => {}
    }
}

pub(crate) fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.options,
        &mut item.head,
        &mut item.patch,
        &mut item.trace,
    ]
    .into_iter()
    .flatten()
}

fn problem(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(PROBLEM, ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).build())
        .build()
}

/// Errors are served as problem+json: an error documented with the `Problem` body says so.
fn as_problems(operation: &mut Operation) {
    for response in operation.responses.responses.values_mut() {
        let RefOr::T(response) = response else { continue };
        let is_problem = response.content.get("application/json").is_some_and(
            |content| matches!(&content.schema, Some(RefOr::Ref(r)) if r.ref_location.ends_with("/Problem")),
        );
        if is_problem {
            let content = response.content.shift_remove("application/json").expect("checked above");
            response.content.insert(PROBLEM.into(), content);
        }
    }
}

fn add_shared(operation: &mut Operation, path: &str, public: bool) {
    use utoipa::openapi::path::ParameterIn;
    let params = operation.parameters.as_deref().unwrap_or_default();
    let has_path_params = path.contains('{');
    let has_inputs = has_path_params
        || operation.request_body.is_some()
        || params.iter().any(|p| matches!(p.parameter_in, ParameterIn::Query | ParameterIn::Header));
    let has_body = operation.request_body.is_some();
    let has_headers = params.iter().any(|p| matches!(p.parameter_in, ParameterIn::Header));
    for (status, name, _) in SHARED {
        let applies = match status {
            "400" => has_body || has_headers,
            "401" => true,
            "403" => !public,
            "404" => has_path_params,
            "413" | "415" => has_body,
            "422" => has_inputs,
            _ => true,
        };
        if applies && !operation.responses.responses.contains_key(status) {
            operation.responses.responses.insert(status.into(), Ref::from_response_name(name).into());
        }
    }
}

/// A header is sent or not, never `null`: an optional one (`Option<String>` in the code) is a plain
/// string. `Idempotency-Key` is 1 to 255 printable ASCII characters (declared once here rather
/// than on every creating route).
fn headers_as_sent(operation: &mut Operation) {
    use utoipa::openapi::path::ParameterIn;
    use utoipa::openapi::schema::{Schema, SchemaType};
    use utoipa::openapi::{ObjectBuilder, Type};
    for parameter in operation.parameters.iter_mut().flatten() {
        if !matches!(parameter.parameter_in, ParameterIn::Header) {
            continue;
        }
        if let Some(RefOr::T(Schema::Object(object))) = &mut parameter.schema {
            if let SchemaType::Array(types) = &object.schema_type {
                if let Some(one) = types.iter().find(|t| **t != Type::Null) {
                    object.schema_type = SchemaType::Type(one.clone());
                }
            }
        }
        if parameter.name == "Idempotency-Key" {
            parameter.schema = Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .min_length(Some(1))
                    .max_length(Some(255))
                    .pattern(Some("^[ -~]+$"))
                    .into(),
            );
        }
    }
}
/// The documented 429: a component response, referenced by every route under `/api/v1` (each is
/// limited by token or by address).
pub fn document_rate_limits(openapi: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{ContentBuilder, HeaderBuilder, Ref, ResponseBuilder};
    let response = ResponseBuilder::new()
        .description("Too many requests: wait `Retry-After` seconds")
        .header(
            "Retry-After",
            HeaderBuilder::new()
                .schema(utoipa::openapi::ObjectBuilder::new().schema_type(utoipa::openapi::Type::Integer))
                .description(Some("Whole seconds until a request will be accepted again"))
                .build(),
        )
        .content(
            "application/problem+json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).build(),
        )
        .build();
    openapi.components.get_or_insert_with(Default::default).responses.insert("TooManyRequests".into(), response.into());
    for (path, item) in openapi.paths.paths.iter_mut() {
        if !path.starts_with("/api/v1/") {
            continue;
        }
        for operation in operations(item) {
            operation.responses.responses.insert("429".into(), Ref::from_response_name("TooManyRequests").into());
        }
    }
}
