"""The headless device service: onboarding -> search -> deploy -> live inference, surviving reboots."""
