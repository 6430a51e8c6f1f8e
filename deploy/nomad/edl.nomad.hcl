# edl's control plane: `edl serve` (API, job store, planner) as a service
# job with two replicas on distinct hosts behind Nomad's service discovery.
# Both serve the API; one holds the planner lease in Redis and plans, the
# other takes over within --planner-lease when it goes away.
#
# Before the first run (see README.md, "Run edl on your Nomad cluster"):
#   nomad namespace apply edl
#   nomad namespace apply ml                      # where training jobs run
#   nomad acl policy apply -description "edl control plane" edl ./edl-policy.hcl
#   nomad acl token create -name edl -policy edl  # its Secret ID goes below
#   nomad var put -namespace edl nomad/jobs/edl \
#     nomad_token=<Secret ID> tenants=@tenants.yaml \
#     aws_access_key_id=... aws_secret_access_key=... \
#     nomad_ca=@nomad-ca.pem nomad_client_cert=@cli.pem nomad_client_key=@cli-key.pem

variable "image" {
  type    = string
  default = "ghcr.io/edl-nomad/edl:latest"
}

variable "store" {
  description = "checkpoint store handed to the workers: s3://bucket/prefix"
  type        = string
  default     = "s3://edl-checkpoints/prod"
}

job "edl" {
  namespace = "edl"
  type      = "service"

  update {
    max_parallel     = 1
    min_healthy_time = "10s"
    healthy_deadline = "2m"
    auto_revert      = true
  }

  group "api" {
    count = 2

    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }

    network {
      port "http" {
        to = 8080
      }
    }

    service {
      name     = "edl-api"
      provider = "nomad"
      port     = "http"
      tags     = ["edl", "http"]

      check {
        name     = "ready"
        type     = "http"
        path     = "/readyz"
        interval = "10s"
        timeout  = "2s"
      }
    }

    task "serve" {
      driver = "docker"

      config {
        image = var.image
        ports = ["http"]
        args  = ["serve"]
      }

      # Every flag of `edl serve` is also read from EDL_<FLAG>.
      env {
        EDL_LISTEN          = "0.0.0.0:8080"
        EDL_STORE           = var.store
        EDL_TENANTS         = "/secrets/tenants.yaml"
        EDL_LOG_JSON        = "true"
        EDL_NOMAD_NAMESPACE = "ml"
        EDL_DRIVER          = "docker"
        EDL_DOCKER_IMAGE    = var.image
        EDL_PLANNER_LEASE   = "10s"
        # TLS to the Nomad API of the local client agent (mTLS when the
        # agents set verify_https_client).
        EDL_NOMAD_ADDR            = "https://${attr.unique.network.ip-address}:4646"
        EDL_NOMAD_CA_CERT         = "/secrets/nomad-ca.pem"
        EDL_NOMAD_CLIENT_CERT     = "/secrets/nomad-client.pem"
        EDL_NOMAD_CLIENT_KEY      = "/secrets/nomad-client-key.pem"
        EDL_NOMAD_TLS_SERVER_NAME = "client.${NOMAD_REGION}.nomad"
      }

      # Redis through service discovery (its password from nomad/jobs), the
      # ACL token and the S3 credentials from the job's own Nomad Variable
      # (nomad/jobs/edl): never in the job spec.
      template {
        destination = "secrets/edl.env"
        env         = true
        change_mode = "restart"
        data        = <<-EOT
          {{ $pw := "" }}{{ with nomadVar "nomad/jobs" }}{{ $pw = .redis_password }}{{ end }}
          {{ range nomadService "edl-redis" }}EDL_REDIS=redis://:{{ $pw }}@{{ .Address }}:{{ .Port }}/0{{ end }}
          {{ with nomadVar "nomad/jobs/edl" }}
          EDL_NOMAD_TOKEN={{ .nomad_token }}
          AWS_ACCESS_KEY_ID={{ .aws_access_key_id }}
          AWS_SECRET_ACCESS_KEY={{ .aws_secret_access_key }}
          {{ end }}
        EOT
      }

      template {
        destination = "secrets/tenants.yaml"
        change_mode = "restart"
        data        = "{{ with nomadVar \"nomad/jobs/edl\" }}{{ .tenants }}{{ end }}"
      }

      template {
        destination = "secrets/nomad-ca.pem"
        data        = "{{ with nomadVar \"nomad/jobs/edl\" }}{{ .nomad_ca }}{{ end }}"
      }

      template {
        destination = "secrets/nomad-client.pem"
        data        = "{{ with nomadVar \"nomad/jobs/edl\" }}{{ .nomad_client_cert }}{{ end }}"
      }

      template {
        destination = "secrets/nomad-client-key.pem"
        perms       = "0600"
        data        = "{{ with nomadVar \"nomad/jobs/edl\" }}{{ .nomad_client_key }}{{ end }}"
      }

      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      resources {
        cpu    = 500
        memory = 512
      }
    }
  }
}
