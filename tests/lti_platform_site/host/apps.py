"""The LMS's side of lti_consumer: its `plugin.compat` module reaches into edx-platform (course members, external
user ids, the block a score is published to); this app answers those calls from its own tables."""
from types import SimpleNamespace

from django.apps import AppConfig


class GradebookBlock:
    """Stands for the LTI block in the LMS when an AGS score is published: it records the grade."""
    has_score = True
    accept_grades_past_due = True

    def __init__(self, location):
        self.location = location
        self.scope_ids = SimpleNamespace(usage_id=location)

    def is_past_due(self):
        return False

    def max_score(self):
        return 1.0

    def set_user_module_score(self, user, score, max_score, comment=""):
        from host.models import Grade
        Grade.objects.update_or_create(user=user, location=str(self.location),
                                       defaults={"score": score, "max_score": max_score, "comment": comment or ""})


def course_members(course_key):
    from host.models import Member
    return {m.user_id: {"id": m.user_id, "username": m.user.username, "email": m.user.email,
                        "name": m.user.get_full_name(), "roles": [m.role]}
            for m in Member.objects.select_related("user")}


def external_ids(users):
    return {user.id: SimpleNamespace(external_user_id=user.profile.external_id) for user in users}


def user_from_external_id(external_id):
    from host.models import Member
    return Member.objects.select_related("user").get(external_id=external_id).user


class HostConfig(AppConfig):
    name = "host"

    def ready(self):
        from lti_consumer.plugin import compat
        compat.get_course_members = course_members
        compat.merge_course_forum_roles = lambda course_key, members: None
        compat.batch_get_or_create_externalids = external_ids
        compat.load_block_as_user = GradebookBlock
        compat.get_user_from_external_user_id = user_from_external_id
