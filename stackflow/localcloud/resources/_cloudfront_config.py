"""A CloudFront distribution's blocks both ways: the program's inputs as CloudFront's
DistributionConfig (its `Quantity`/`Items` lists, pulumi-aws's defaults filled in) and the cloud's
DistributionConfig in the program's shape, for reading back without false drift.

moto reports `CloudFrontDefaultCertificate` true whatever the certificate, so that one field is
not read back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stackflow.localcloud.registry import Props
from stackflow.localcloud.resources._shared import same_members

DEFAULT_TTL = 86400  # AWS's, when a behavior without a cache policy gives none
MAX_TTL = 31536000


def _items(values: Sequence[Any]) -> dict[str, Any]:
    return {"Quantity": len(values), "Items": list(values)}


def _listed(wrapper: Mapping[str, Any] | None) -> list[Any]:
    return list((wrapper or {}).get("Items") or [])


# --- the program's blocks in CloudFront's words ----------------------------------------------


def _origin(origin: Mapping[str, Any]) -> dict[str, Any]:
    headers = [
        {"HeaderName": str(h["name"]), "HeaderValue": str(h["value"])}
        for h in origin.get("customHeaders") or []
    ]
    found: dict[str, Any] = {
        "Id": str(origin["originId"]),
        "DomainName": str(origin["domainName"]),
        "OriginPath": str(origin.get("originPath") or ""),
        "ConnectionAttempts": int(origin.get("connectionAttempts") or 3),
        "ConnectionTimeout": int(origin.get("connectionTimeout") or 10),
        "CustomHeaders": _items(headers),
    }
    custom = origin.get("customOriginConfig")
    if custom:
        found["CustomOriginConfig"] = {
            "HTTPPort": int(custom["httpPort"]),
            "HTTPSPort": int(custom["httpsPort"]),
            "OriginProtocolPolicy": str(custom["originProtocolPolicy"]),
            "OriginSslProtocols": _items([str(p) for p in custom["originSslProtocols"]]),
            "OriginReadTimeout": int(custom.get("originReadTimeout") or 30),
            "OriginKeepaliveTimeout": int(custom.get("originKeepaliveTimeout") or 5),
        }
    else:  # an S3 origin: its identity, or none when an origin access control signs
        identity = (origin.get("s3OriginConfig") or {}).get("originAccessIdentity") or ""
        found["S3OriginConfig"] = {"OriginAccessIdentity": str(identity)}
    if origin.get("originAccessControlId"):
        found["OriginAccessControlId"] = str(origin["originAccessControlId"])
    return found


def _behavior(behavior: Mapping[str, Any]) -> dict[str, Any]:
    signers = [str(s) for s in behavior.get("trustedSigners") or []]
    groups = [str(g) for g in behavior.get("trustedKeyGroups") or []]
    found: dict[str, Any] = {
        "TargetOriginId": str(behavior["targetOriginId"]),
        "ViewerProtocolPolicy": str(behavior["viewerProtocolPolicy"]),
        "AllowedMethods": {
            **_items([str(m) for m in behavior["allowedMethods"]]),
            "CachedMethods": _items([str(m) for m in behavior["cachedMethods"]]),
        },
        "Compress": bool(behavior.get("compress")),
        "SmoothStreaming": bool(behavior.get("smoothStreaming")),
        "TrustedSigners": {"Enabled": bool(signers), **_items(signers)},
        "TrustedKeyGroups": {"Enabled": bool(groups), **_items(groups)},
        "FieldLevelEncryptionId": str(behavior.get("fieldLevelEncryptionId") or ""),
    }
    for key, name in (
        ("cachePolicyId", "CachePolicyId"),
        ("originRequestPolicyId", "OriginRequestPolicyId"),
        ("responseHeadersPolicyId", "ResponseHeadersPolicyId"),
        ("realtimeLogConfigArn", "RealtimeLogConfigArn"),
        ("pathPattern", "PathPattern"),
    ):
        if behavior.get(key):
            found[name] = str(behavior[key])
    if behavior.get("cachePolicyId"):
        return found  # a cache policy decides the TTLs and what is forwarded
    forwarded = behavior.get("forwardedValues") or {}
    cookies = forwarded.get("cookies") or {}
    found["ForwardedValues"] = {
        "QueryString": bool(forwarded.get("queryString")),
        "Cookies": {
            "Forward": str(cookies.get("forward") or "none"),
            "WhitelistedNames": _items([str(n) for n in cookies.get("whitelistedNames") or []]),
        },
        "Headers": _items([str(h) for h in forwarded.get("headers") or []]),
        "QueryStringCacheKeys": _items(
            [str(k) for k in forwarded.get("queryStringCacheKeys") or []]
        ),
    }
    found["MinTTL"] = int(behavior.get("minTtl") or 0)
    default, maximum = behavior.get("defaultTtl"), behavior.get("maxTtl")
    found["DefaultTTL"] = int(DEFAULT_TTL if default is None else default)
    found["MaxTTL"] = int(MAX_TTL if maximum is None else maximum)
    return found


def _error_response(given: Mapping[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {"ErrorCode": int(given["errorCode"])}
    if given.get("responseCode") not in (None, ""):
        found["ResponseCode"] = str(int(given["responseCode"]))
    if given.get("responsePagePath"):
        found["ResponsePagePath"] = str(given["responsePagePath"])
    if given.get("errorCachingMinTtl") is not None:
        found["ErrorCachingMinTTL"] = int(given["errorCachingMinTtl"])
    return found


def _certificate(given: Mapping[str, Any]) -> dict[str, Any]:
    protocol = str(given.get("minimumProtocolVersion") or "TLSv1")
    for key, name in (
        ("acmCertificateArn", "ACMCertificateArn"),
        ("iamCertificateId", "IAMCertificateId"),
    ):
        if given.get(key):
            return {
                name: str(given[key]),
                "SSLSupportMethod": str(given.get("sslSupportMethod") or "sni-only"),
                "MinimumProtocolVersion": protocol,
                "CloudFrontDefaultCertificate": False,
            }
    return {"CloudFrontDefaultCertificate": True, "MinimumProtocolVersion": protocol}


def distribution_config(inputs: Props, reference: str) -> dict[str, Any]:
    """The DistributionConfig `inputs` declare (`reference`: its caller reference)."""
    logging = inputs.get("loggingConfig") or {}
    geo = (inputs.get("restrictions") or {}).get("geoRestriction") or {}
    return {
        "CallerReference": reference,
        "Aliases": _items([str(a) for a in inputs.get("aliases") or []]),
        "DefaultRootObject": str(inputs.get("defaultRootObject") or ""),
        "Origins": _items([_origin(o) for o in inputs["origins"]]),
        "DefaultCacheBehavior": _behavior(inputs["defaultCacheBehavior"]),
        "CacheBehaviors": _items([_behavior(b) for b in inputs.get("orderedCacheBehaviors") or []]),
        "CustomErrorResponses": _items(
            [_error_response(r) for r in inputs.get("customErrorResponses") or []]
        ),
        "Comment": str(inputs.get("comment") or ""),
        "Logging": {
            "Enabled": bool(logging),
            "IncludeCookies": bool(logging.get("includeCookies")),
            "Bucket": str(logging.get("bucket") or ""),
            "Prefix": str(logging.get("prefix") or ""),
        },
        "PriceClass": str(inputs.get("priceClass") or "PriceClass_All"),
        "Enabled": bool(inputs["enabled"]),
        "ViewerCertificate": _certificate(inputs.get("viewerCertificate") or {}),
        "Restrictions": {
            "GeoRestriction": {
                "RestrictionType": str(geo.get("restrictionType") or "none"),
                **_items([str(c) for c in geo.get("locations") or []]),
            }
        },
        "WebACLId": str(inputs.get("webAclId") or ""),
        "HttpVersion": str(inputs.get("httpVersion") or "http2"),
        "IsIPV6Enabled": bool(inputs.get("isIpv6Enabled")),
    }


# --- the cloud's answer in the program's shape ---------------------------------------------


def _observed_origin(origin: Mapping[str, Any]) -> Props:
    found: Props = {
        "originId": origin["Id"],
        "domainName": origin["DomainName"],
        "originPath": origin.get("OriginPath", ""),
        "connectionAttempts": origin.get("ConnectionAttempts"),
        "connectionTimeout": origin.get("ConnectionTimeout"),
        "originAccessControlId": origin.get("OriginAccessControlId", ""),
    }
    custom = origin.get("CustomOriginConfig")
    if custom:
        found["customOriginConfig"] = {
            "httpPort": custom["HTTPPort"],
            "httpsPort": custom["HTTPSPort"],
            "originProtocolPolicy": custom["OriginProtocolPolicy"],
            "originSslProtocols": _listed(custom.get("OriginSslProtocols")),
            "originReadTimeout": custom.get("OriginReadTimeout"),
            "originKeepaliveTimeout": custom.get("OriginKeepaliveTimeout"),
        }
    if origin.get("S3OriginConfig"):
        identity = origin["S3OriginConfig"].get("OriginAccessIdentity", "")
        found["s3OriginConfig"] = {"originAccessIdentity": identity}
    return found


def _observed_behavior(behavior: Mapping[str, Any], current: Any) -> Props:
    current = current if isinstance(current, Mapping) else {}
    methods = behavior.get("AllowedMethods") or {}
    found: Props = {
        "targetOriginId": behavior["TargetOriginId"],
        "viewerProtocolPolicy": behavior["ViewerProtocolPolicy"],
        "allowedMethods": same_members(_listed(methods), current.get("allowedMethods")),
        "cachedMethods": same_members(
            _listed(methods.get("CachedMethods")), current.get("cachedMethods")
        ),
        "compress": bool(behavior.get("Compress")),
        "smoothStreaming": bool(behavior.get("SmoothStreaming")),
        "cachePolicyId": behavior.get("CachePolicyId", ""),
        "pathPattern": behavior.get("PathPattern"),
    }
    forwarded = behavior.get("ForwardedValues")
    if forwarded:
        found["forwardedValues"] = {
            "queryString": bool(forwarded.get("QueryString")),
            "cookies": {"forward": (forwarded.get("Cookies") or {}).get("Forward", "none")},
            "headers": same_members(
                _listed(forwarded.get("Headers")),
                (current.get("forwardedValues") or {}).get("headers"),
            ),
        }
        found.update(
            minTtl=behavior.get("MinTTL"),
            defaultTtl=behavior.get("DefaultTTL"),
            maxTtl=behavior.get("MaxTTL"),
        )
    return found


def observed_config(config: Mapping[str, Any], state: Props) -> Props:
    """The cloud's DistributionConfig `config` as the program's inputs, shaped like `state`."""
    certificate = config.get("ViewerCertificate") or {}
    logging = config.get("Logging") or {}
    geo = (config.get("Restrictions") or {}).get("GeoRestriction") or {}
    errors = [
        {
            "errorCode": e["ErrorCode"],
            "responseCode": int(e["ResponseCode"]) if e.get("ResponseCode") else None,
            "responsePagePath": e.get("ResponsePagePath"),
            "errorCachingMinTtl": e.get("ErrorCachingMinTTL"),
        }
        for e in _listed(config.get("CustomErrorResponses"))
    ]
    ordered = state.get("orderedCacheBehaviors") or []
    behaviors = _listed(config.get("CacheBehaviors"))
    return {
        "enabled": bool(config.get("Enabled")),
        "comment": config.get("Comment", ""),
        "defaultRootObject": config.get("DefaultRootObject", ""),
        "priceClass": config.get("PriceClass"),
        "httpVersion": config.get("HttpVersion"),
        "isIpv6Enabled": bool(config.get("IsIPV6Enabled")),
        "webAclId": config.get("WebACLId", ""),
        "aliases": same_members(_listed(config.get("Aliases")), state.get("aliases")),
        "origins": same_members(
            [_observed_origin(o) for o in _listed(config.get("Origins"))], state.get("origins")
        ),
        "defaultCacheBehavior": _observed_behavior(
            config["DefaultCacheBehavior"], state.get("defaultCacheBehavior")
        ),
        "orderedCacheBehaviors": [
            _observed_behavior(b, ordered[i] if i < len(ordered) else None)
            for i, b in enumerate(behaviors)
        ],
        "customErrorResponses": same_members(errors, state.get("customErrorResponses")),
        "viewerCertificate": {  # CloudFrontDefaultCertificate: moto's is not AWS's (see above)
            "acmCertificateArn": certificate.get("ACMCertificateArn", ""),
            "iamCertificateId": certificate.get("IAMCertificateId", ""),
            "sslSupportMethod": certificate.get("SSLSupportMethod"),
            "minimumProtocolVersion": certificate.get("MinimumProtocolVersion"),
        },
        "restrictions": {
            "geoRestriction": {
                "restrictionType": geo.get("RestrictionType", "none"),
                "locations": same_members(
                    _listed(geo),
                    ((state.get("restrictions") or {}).get("geoRestriction") or {}).get(
                        "locations"
                    ),
                ),
            }
        },
        "loggingConfig": {
            "bucket": logging.get("Bucket", ""),
            "includeCookies": bool(logging.get("IncludeCookies")),
            "prefix": logging.get("Prefix", ""),
        }
        if logging.get("Enabled")
        else None,
    }
