"""IAM enforced on the rehearsal's endpoint: every request is signed by someone and allowed by their
policies, as in AWS, so that a grant the synthesized stacks lack fails here too (``AccessDenied``).

Who signs what:
- the operator (tests, ``lakeline`` commands against the endpoint): an IAM user allowed everything, as
  the person who runs ``cdk deploy`` usually is (``operator_credentials``);
- each deployed function: temporary credentials of its own synthesized role, as Lambda gives them
  (``role_credentials``, made by moto's STS as ``AssumeRole`` would, without the trust policy check
  moto cannot do for a service principal);
- each state machine's tasks: its own role's credentials (``executions.py``).

moto evaluates the policies (``moto.iam.access_control``). What it cannot, and so what this rehearsal
does not check, each a documented gap (``tests/rehearsal/test_iam.py``):
- resources, except S3's (bucket and key) and SQS's (the queue): moto authorizes every other
  service's actions against ``*``, so a statement naming resources is taken as allowing its actions on
  any resource (the same limit as ``tests/infrastructure/test_grants.py``);
- conditions of identity policies (an ``Allow`` with a condition counts as allowing; a conditional
  ``Deny`` is left out);
- ``NotResource`` where moto does not name the resource (the services above): a statement with it is taken as
  naming every resource, so a ``Deny`` with ``NotResource`` refuses its actions there (stricter than AWS);
  where it names one (S3, SQS) a statement applies to the resources it does not list, as in AWS;
- key policies and the KMS use an encrypted bucket or queue implies; resource policies of buckets,
  queues and topics;
- what AWS services other than Athena do with the caller's credentials (Athena's reads and writes of Glue
  and S3 as its caller are checked by ``athena_caller``).
S3's multi-object delete is authorized per object, as S3 does (moto asks for the bucket).
An operation is authorized by the IAM actions ``lakeline.aws.actions.iam_actions`` names for it (a
DynamoDB transaction by each kind of item's action, an S3 or SQS call on the data key's buckets and
queues by the KMS use too, Lambda's ``Invoke`` by ``lambda:InvokeFunction``); action names are matched
case-insensitively, as AWS matches them.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lakeline.aws.actions import iam_actions

OPERATOR = "lakeline-rehearsal-operator"

_patched = threading.Lock()
_done = False


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str
    session_token: str | None = None

    def environment(self) -> dict[str, str]:
        """The variables the AWS SDKs read them from, as Lambda sets them for a function."""
        found = {"AWS_ACCESS_KEY_ID": self.access_key_id, "AWS_SECRET_ACCESS_KEY": self.secret_access_key}
        if self.session_token:
            found["AWS_SESSION_TOKEN"] = self.session_token
        return found

    def client_arguments(self) -> dict[str, str]:
        found = {"aws_access_key_id": self.access_key_id, "aws_secret_access_key": self.secret_access_key}
        if self.session_token:
            found["aws_session_token"] = self.session_token
        return found


def operator_credentials(account: str) -> Credentials:
    """An access key of an IAM user allowed everything (created on first use)."""
    from moto.iam.models import iam_backends

    backend = iam_backends[account]["aws"]
    if OPERATOR not in backend.users:
        backend.create_user(region_name="us-east-1", user_name=OPERATOR, path="/", tags=None)
        backend.put_user_policy(
            OPERATOR,
            "everything",
            json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}),
        )
    key = backend.create_access_key(OPERATOR)
    return Credentials(key.access_key_id, key.secret_access_key)


def role_credentials(account: str, region: str, role_arn: str, session: str) -> Credentials:
    """Temporary credentials of ``role_arn`` (12 hours), as the service that runs with it is given."""
    from moto.sts.models import sts_backends

    assumed = sts_backends[account]["aws"].assume_role(
        region_name=region,
        role_session_name=session[:64],
        role_arn=role_arn,
        policy="",
        duration=12 * 3600,
        external_id="",
    )
    return Credentials(assumed.access_key_id, assumed.secret_access_key, assumed.session_token)


def permitted(policies: Iterable[Any], action: str, resource: str) -> bool:
    """Whether ``policies`` (moto's policy objects, or documents as JSON text) allow ``action`` on ``resource``, as
    IAM decides within one account: an explicit deny in any wins, else one must allow."""
    from moto.iam.access_control import IAMPolicy, PermissionResult

    _patch_moto()
    results = [IAMPolicy(policy).is_action_permitted(action, resource) for policy in policies]
    return PermissionResult.DENIED not in results and PermissionResult.PERMITTED in results


def enforce() -> None:
    """Authorize every request from now on (until ``relax``)."""
    from moto import settings

    _patch_moto()
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0


def relax() -> None:
    """Stop authorizing requests (moto's default, unless the environment set it), e.g. when the
    rehearsal's server stops."""
    import os

    from moto import settings

    settings.INITIAL_NO_AUTH_ACTION_COUNT = float(os.environ.get("INITIAL_NO_AUTH_ACTION_COUNT", float("inf")))


def _patch_moto() -> None:
    global _done
    with _patched:
        if _done:
            return
        import moto.iam.access_control as access_control

        statement_class = access_control.IAMPolicyStatement
        original = statement_class.is_action_permitted

        def is_action_permitted(
            self: Any,
            action: str,
            resource: str = "*",
            principal: str | None = None,
            incoming_condition_values: dict[str, str] | None = None,
        ) -> Any:
            statement = dict(self._statement)
            if principal is None:  # an identity policy: conditions are not evaluated (see the module's gaps)
                if "Condition" in statement and statement.get("Effect") == "Deny":
                    return access_control.PermissionResult.NEUTRAL
                statement.pop("Condition", None)
                if resource == "*" and ("Resource" in statement or "NotResource" in statement):
                    statement.pop("NotResource", None)
                    statement["Resource"] = "*"  # moto did not say which resource: actions only
                elif "NotResource" in statement:
                    # moto takes a statement without "Resource" for a trust policy's and so as applying to every
                    # resource, whatever its effect: a Deny with NotResource allowed everything, an Allow with
                    # NotResource allowed the resources it excludes. It applies to the resources not listed.
                    if self._check_element_matches("NotResource", resource):
                        return access_control.PermissionResult.NEUTRAL
                    statement.pop("NotResource")
                    statement["Resource"] = "*"
            return original(statement_class(statement), action, resource, principal, incoming_condition_values)

        def matches(self: Any, element: str, value: str) -> bool:
            # Action names match case-insensitively, as AWS matches them; ARNs and keys case-sensitively.
            patterns = self._statement[element]
            flags = re.IGNORECASE if element in ("Action", "NotAction") else 0
            for pattern in patterns if isinstance(patterns, list) else [patterns]:
                wildcards = re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".")
                if re.match(f"^{wildcards}$", value, flags):
                    return True
            return False

        request_class = access_control.IAMRequestBase
        create_request = request_class._create_aws_request
        check = request_class.check_action_permitted

        def check_action_permitted(self: Any, resource: str) -> None:
            # An operation is authorized by its IAM actions (a transaction by each kind of item's, an S3
            # call on the data key's buckets by the KMS use too), each of which must be allowed.
            service, _, operation = self._action.partition(":")
            asked = self._action
            try:
                for action in iam_actions(service, operation):
                    self._action = action
                    check(self, resource if action.startswith(f"{service}:") else "*")
            finally:
                self._action = asked

        def create_aws_request(self: Any) -> Any:
            # moto checks a signature over ``body or data``, and for a request without a body its data is
            # the query string's parameters (``ListFunctions?MaxItems=…``) or, with none, the request's
            # headers (``lambda invoke`` without a payload, ``Content-Length: 0``): neither is what the
            # client signed, an empty body. Only a form post's data is its body (werkzeug parsed it).
            form = "application/x-www-form-urlencoded" in str(self._headers.get("Content-Type", ""))
            if not self._body and not form:
                self._data = {}
            return create_request(self)

        def raise_access_denied(self: Any) -> None:
            # moto answers a refusal in XML, which an SDK cannot read from a JSON service (Athena, Glue,
            # DynamoDB, Step Functions, Lambda): it reports code "403" instead of AccessDeniedException.
            from moto.core.exceptions import AccessDeniedError, JsonRESTError

            user, action = self._access_key.arn, self._action
            if "json" in str(self._headers.get("Content-Type", "")) or self._headers.get("X-Amz-Target"):
                raise JsonRESTError("AccessDeniedException", f"User: {user} is not authorized to perform: {action}")
            raise AccessDeniedError(user_arn=user, action=action)

        setattr(access_control.IAMRequest, "_raise_access_denied", raise_access_denied)  # noqa: B010
        _authorize_multi_object_delete_per_object()
        setattr(request_class, "_create_aws_request", create_aws_request)  # noqa: B010
        setattr(request_class, "check_action_permitted", check_action_permitted)  # noqa: B010
        setattr(statement_class, "is_action_permitted", is_action_permitted)  # noqa: B010
        setattr(statement_class, "_check_element_matches", matches)  # noqa: B010
        _done = True


def _authorize_multi_object_delete_per_object() -> None:
    """S3's ``DeleteObjects`` needs ``s3:DeleteObject`` on each object it deletes; moto asks for it on the
    bucket and, refused there, refuses every key, so a role granted ``bucket/*`` (as CDK grants it) could
    delete nothing. Here each key is authorized on its own ARN first; when all are allowed the request
    goes on as authorized (a request mixing allowed and refused keys is refused whole: stricter than S3)."""
    from xml.etree import ElementTree

    from moto.s3.exceptions import S3AccessDeniedError
    from moto.s3.responses import S3Response

    original = S3Response._bucket_response_delete_keys

    def delete_keys(self: Any, bucket_name: str, authenticated: bool = True) -> Any:
        if authenticated:
            return original(self, bucket_name, authenticated)
        keys = [
            element.text or ""
            for element in ElementTree.fromstring(self.body).iter()
            if element.tag.rsplit("}", 1)[-1] == "Key"  # <Delete><Object><Key>, with or without S3's namespace
        ]
        try:
            for key in keys:
                self._authenticate_and_authorize_s3_action(bucket_name=bucket_name, key_name=key)
        except S3AccessDeniedError:
            return original(self, bucket_name, False)
        return original(self, bucket_name, True)

    setattr(S3Response, "_bucket_response_delete_keys", delete_keys)  # noqa: B010
