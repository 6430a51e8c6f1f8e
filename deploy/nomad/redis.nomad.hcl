# Redis for edl's control plane: the job store, the planner lease and the
# workers' coordination. One instance with its data on a host volume and the
# append-only file on (appendfsync everysec: at most a second of writes lost
# on a crash). The client that runs it needs the host volume in its agent
# configuration:
#
#   client {
#     host_volume "edl-redis" {
#       path      = "/opt/edl/redis"
#       read_only = false
#     }
#   }
#
# The password is a Nomad Variable at nomad/jobs, the path every job of the
# namespace may read through its workload identity (edl's job reads it
# too; keep namespace edl to these two jobs):
#
#   nomad var put -namespace edl nomad/jobs redis_password="$(openssl rand -hex 24)"

job "edl-redis" {
  namespace = "edl"
  type      = "service"

  group "redis" {
    count = 1

    volume "data" {
      type      = "host"
      source    = "edl-redis"
      read_only = false
    }

    network {
      port "redis" {
        to = 6379
      }
    }

    service {
      name     = "edl-redis"
      provider = "nomad"
      port     = "redis"

      check {
        type     = "tcp"
        interval = "10s"
        timeout  = "2s"
      }
    }

    restart {
      attempts = 10
      interval = "5m"
      delay    = "5s"
      mode     = "delay"
    }

    task "redis" {
      driver = "docker"

      config {
        image   = "redis:7.2"
        ports   = ["redis"]
        command = "redis-server"
        args    = ["/local/redis.conf"]
      }

      volume_mount {
        volume      = "data"
        destination = "/data"
      }

      template {
        destination = "local/redis.conf"
        perms       = "0600"
        data        = <<-EOT
          dir /data
          appendonly yes
          appendfsync everysec
          save 900 1
          {{ with nomadVar "nomad/jobs" }}requirepass {{ .redis_password }}{{ end }}
        EOT
      }

      resources {
        cpu    = 500
        memory = 1024
      }
    }
  }
}
