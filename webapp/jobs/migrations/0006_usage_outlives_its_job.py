"""The usage ledger keeps its rows when a job is deleted: the job link becomes nullable
(SET_NULL) and each row keeps the job's id and name, filled in here for existing rows."""

import django.db.models.deletion
from django.db import migrations, models

BACKFILL = """
UPDATE jobs_usagerecord SET job_uuid = job_id,
    job_name = COALESCE((SELECT name FROM jobs_job WHERE jobs_job.id = jobs_usagerecord.job_id), '')
"""


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0005_job_engine_mode"),
    ]

    operations = [
        migrations.AddField(
            model_name="usagerecord",
            name="job_uuid",
            field=models.UUIDField(null=True, help_text="The job's id, kept when the job is deleted."),
        ),
        migrations.AddField(
            model_name="usagerecord",
            name="job_name",
            field=models.CharField(default="", help_text="The job's name when it was billed.", max_length=120),
        ),
        migrations.RunSQL(BACKFILL, reverse_sql=migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="usagerecord",
            name="job_uuid",
            field=models.UUIDField(help_text="The job's id, kept when the job is deleted."),
        ),
        migrations.AlterField(
            model_name="usagerecord",
            name="job",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="usage",
                to="jobs.job",
            ),
        ),
    ]
