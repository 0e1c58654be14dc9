//! Fixtures shared by the tests and the benches (which include this file by path): the
//! AdmissionReview of a Pod CREATE as the API server sends it, in
//! `tests/fixtures/pod-create-review.json`.

use serde_json::Value as Json;

/// The review as stored: Pod `default/p`, created by `alice`.
pub const POD_CREATE_REVIEW: &str = include_str!("../fixtures/pod-create-review.json");

/// The fixture's review with `object` (its name and namespace copied to the request) sent by
/// `user` (a `userInfo`).
pub fn pod_create_review(object: Json, user: Json) -> Json {
    let mut review: Json =
        serde_json::from_str(POD_CREATE_REVIEW).expect("the Pod review fixture is JSON");
    let request = &mut review["request"];
    request["name"] = object["metadata"]["name"].clone();
    request["namespace"] = object["metadata"]["namespace"].clone();
    request["userInfo"] = user;
    request["object"] = object;
    review
}
