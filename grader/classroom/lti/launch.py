"""An LTI 1.3 launch checked, and the LMS's user mapped to a hub user through the one gate for identity.

The platform posts a signed id_token (OpenID Connect, after the login initiation). `verify_launch` accepts it
only when every one of these holds, else `LaunchRefused` says which failed and nothing is recorded:
- from the registered platform: its issuer, our client id as the audience, a registered deployment id;
- signed by a key from the platform's JWKS URL (the registered URL, never one the token names; the key set is
  cached, fetched again for a key id it lacks), within its lifetime (exp, iat);
- a valid LTI message (jupyterhub-ltiauthenticator's checks: message type, version, resource link);
- its nonce the one this browser's login initiation issued, and never used before (a replayed launch).
`hub_user` names the hub user from the LMS's stable user id (`sub`), never a display name or an email.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import jwt

from grader.chapters import find_chapter
from grader.classroom.intake.identity import SAFE_NAME, admit_student

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
DEPLOYMENT = CLAIM + "deployment_id"
ROLES = CLAIM + "roles"
CUSTOM = CLAIM + "custom"
AGS = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
LEEWAY = 10  # seconds of clock difference between the LMS and the hub
NONCE_LIFETIME = 2 * 3600  # a nonce is remembered longer than any id_token lives


class LaunchRefused(ValueError):
    """A launch the hub does not accept; the text says why (shown on the refusal page)."""


class KeyCache:
    """The platform's signing keys, one PyJWKClient (PyJWT) per JWKS URL: the key set is fetched once and kept
    `lifespan` seconds; a token whose key id it lacks fetches it again (the LMS rotated its keys)."""

    def __init__(self, lifespan: int = 3600):
        self.lifespan, self.clients, self.lock = lifespan, {}, threading.Lock()

    def key_for(self, url: str, token: str):
        with self.lock:
            client = self.clients.get(url)
            if client is None:
                client = self.clients[url] = jwt.PyJWKClient(url, cache_keys=True, lifespan=self.lifespan, timeout=10)
        try:
            return client.get_signing_key_from_jwt(token).key
        except jwt.PyJWKClientConnectionError as err:
            raise LaunchRefused(f"the LMS's keys could not be fetched from {url}: {err}") from None
        except jwt.PyJWKClientError as err:
            raise LaunchRefused(f"the launch is not signed by a key of the LMS ({err})") from None


class NonceBook:
    """Nonces already used (a file, so a restarted hub still refuses a replay), each kept NONCE_LIFETIME."""

    def __init__(self, path: Path):
        self.path, self.lock = path, threading.Lock()

    def use(self, nonce: str) -> None:
        """Record `nonce` as used; LaunchRefused if it was."""
        with self.lock:
            now = time.time()
            try:
                seen = json.loads(self.path.read_text())
            except (OSError, ValueError):
                seen = {}
            seen = {n: t for n, t in seen.items() if t > now - NONCE_LIFETIME}
            if nonce in seen:
                raise LaunchRefused("this launch was already used (a replayed launch): start it again from the LMS")
            seen[nonce] = now
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temp = self.path.with_name(self.path.name + ".new")
            temp.write_text(json.dumps(seen))
            os.replace(temp, self.path)


def verify_launch(token: str, platform, nonce: str | None, book: NonceBook, keys: KeyCache) -> dict:
    """The id_token's claims when `platform` (grader.classroom.lti.platform.Platform) sent it for this browser
    (`nonce`: the one its login initiation issued); else LaunchRefused saying why."""
    from ltiauthenticator.lti13.error import ValidationError
    from ltiauthenticator.lti13.validator import LTI13LaunchValidator

    if not isinstance(token, str) or not token:
        raise LaunchRefused("the launch has no id_token")
    try:
        unverified = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError as err:
        raise LaunchRefused(f"the launch's id_token is not a JWT ({err})") from None
    if unverified.get("iss") != platform.issuer:
        raise LaunchRefused(f"unknown platform: the issuer {str(unverified.get('iss'))[:200]!r} is not registered")
    key = keys.key_for(platform.key_set_url, token)
    try:
        claims = jwt.decode(token, key, algorithms=["RS256"], audience=platform.client_id, issuer=platform.issuer,
                            leeway=LEEWAY, options={"require": ["exp", "iat", "sub", "nonce", "aud", "iss"]})
    except jwt.ExpiredSignatureError:
        raise LaunchRefused("the launch has expired: start it again from the LMS") from None
    except jwt.InvalidAudienceError:
        raise LaunchRefused(f"wrong audience: the launch is not for this tool ({platform.client_id})") from None
    except jwt.InvalidSignatureError:
        raise LaunchRefused("forged launch: its signature is not the LMS's") from None
    except jwt.PyJWTError as err:
        raise LaunchRefused(f"the launch's id_token is not valid: {err}") from None
    validator = LTI13LaunchValidator()
    try:
        validator.validate_id_token(claims)
        validator.validate_azp_claim(claims, {platform.client_id})
    except ValidationError as err:
        raise LaunchRefused(f"not an LTI 1.3 launch: {err}") from None
    if claims.get(DEPLOYMENT) not in platform.deployment_ids:
        raise LaunchRefused(f"unknown platform: the deployment {str(claims.get(DEPLOYMENT))[:200]!r} is not registered")
    if nonce is None or claims["nonce"] != nonce:
        raise LaunchRefused("the launch's nonce is not the one this browser's login issued: start again from the LMS")
    book.use(claims["nonce"])
    return claims


def is_staff(claims: dict) -> bool:
    """An instructor, a TA or an administrator of the LMS context (LTI's role vocabulary)."""
    return any(role.rsplit("#", 1)[-1] in ("Instructor", "TeachingAssistant", "Administrator", "ContentDeveloper")
               for role in claims.get(ROLES, []) if isinstance(role, str))


def derived_name(issuer: str, sub: str) -> str:
    """A hub user name for an LMS user with no name in accounts.json: from the stable id, never a display name."""
    return "lti-" + hashlib.sha256(f"{issuer}\n{sub}".encode()).hexdigest()[:12]


def hub_user(claims: dict, accounts: dict[str, str], staff: set[str]) -> str:
    """The hub user of a verified launch: accounts.json's name for its `sub` (the roster sync and the
    instructor write it) or one derived from `sub`; a learner must pass the one gate, a member of staff must be
    the hub's instructor or a grader. LaunchRefused (nothing recorded) otherwise."""
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub:
        raise LaunchRefused("the launch names no user (an empty sub)")
    name = accounts.get(sub) or derived_name(claims["iss"], sub)
    if not SAFE_NAME.fullmatch(name):
        raise LaunchRefused("accounts.json maps this LMS user to a name the hub cannot use")
    if is_staff(claims):
        if name not in staff:
            raise LaunchRefused(f"{name} is staff in the LMS but neither the instructor nor a grader of this hub")
        return name
    try:
        return admit_student(name)
    except ValueError as err:
        raise LaunchRefused(str(err)) from None


def chapter_of(claims: dict):
    """The chapter a launch's resource link names (its custom parameter chapter=NN, or its URL's ?chapter=NN;
    a known chapter only, so never a path the LMS chose), or None."""
    custom = claims.get(CUSTOM) or {}
    key = custom.get("chapter") if isinstance(custom, dict) else None
    if not isinstance(key, str):
        target = claims.get(CLAIM + "target_link_uri")
        key = parse_qs(urlparse(target).query).get("chapter", [None])[0] if isinstance(target, str) else None
    if not isinstance(key, str):
        return None
    try:
        return find_chapter(key)
    except ValueError:
        return None


def landing(claims: dict) -> str | None:
    """Where a launch lands: the notebook of the chapter its link names; None for the hub's home."""
    chapter = chapter_of(claims)
    return f"user-redirect/lab/tree/{chapter.assignment}/{chapter.notebook_name}" if chapter else None
