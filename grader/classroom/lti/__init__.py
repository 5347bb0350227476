"""The course inside the LMS: LTI 1.3 (guides/teaching.md: The course in your LMS).

- `platform`: the LMS the class is registered with (issuer, client id, deployments, its URLs) and the
  tool's own key, read from the folder $COURSE_LTI (platform.json);
- `launch`: a launch's id_token checked (the platform's keys from its JWKS URL, cached; audience, expiry,
  deployment, a nonce used once) and the LMS's stable user id (`sub`) mapped to a hub user through the one
  gate for identity (grader.classroom.intake.identity.admit_student); `hub` puts it in JupyterHub, on top of the
  JupyterHub project's own jupyterhub-ltiauthenticator;
- `outbox`: each chapter's one total posted to the LMS gradebook (Assignment and Grade Services) when it
  changes, from the grading service's publishing step; a failed post stays queued and is retried;
- `roster`: the class from Names and Role Provisioning Services (learners, graders, instructors).
pylti1p3 signs and sends the service calls, PyJWT checks the launch: nothing here does its own crypto.

May import: intake (identity's one gate), grades (the one total) and the bottom (ledger); chapters.
Used by: grading (publish: the outbox's round), onsubmit (the class page's LMS gradebook section), the hub's
configuration (deploy/jupyterhub: `hub`), `python -m grader.classroom.lti roster`.
"""
