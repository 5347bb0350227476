"""What the Open edX LMS keeps around lti_consumer and the test platform keeps here: who is in the course (with
the stable external id LTI sends as `sub`) and the gradebook that AGS scores are published to."""
from django.conf import settings
from django.db import models


class Member(models.Model):
    # related_name "profile": lti_consumer's NRPS view prefetches the LMS's user profile under that name.
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profile")
    external_id = models.CharField(max_length=64, unique=True)
    role = models.CharField(max_length=32)  # an Open edX course role: student, staff, instructor, Community TA


class Grade(models.Model):
    """The LMS gradebook's entry for one learner and one block (what `set_user_module_score` records)."""
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    location = models.CharField(max_length=255)
    score = models.FloatField()  # a fraction of the block's maximum, as the LMS keeps it
    max_score = models.FloatField()
    comment = models.TextField(blank=True, default="")

    class Meta:
        unique_together = [("user", "location")]
